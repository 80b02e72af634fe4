# The linker: lld when the compiler can use it, else gold, else the default (GNU ld). A cold
# build links ktune and some 150 test programs; lld and gold each link build/ktune in 19-21 s
# where GNU ld takes 35 s (2-vCPU EPYC VM).
include(CheckLinkerFlag)
check_linker_flag(CXX -fuse-ld=lld KTUNE_HAVE_LLD)
if(KTUNE_HAVE_LLD)
  add_link_options(-fuse-ld=lld)
else()
  check_linker_flag(CXX -fuse-ld=gold KTUNE_HAVE_GOLD)
  if(KTUNE_HAVE_GOLD)
    add_link_options(-fuse-ld=gold)
  endif()
endif()
