# Toolchain file: cross-build for 64-bit Arm Linux with Debian's cross compiler
# (g++-aarch64-linux-gnu) against arm64 multiarch libraries in /usr/lib/aarch64-linux-gnu
# (`dpkg --add-architecture arm64`; scripts/build-device installs them).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Libraries and CMake packages of the target architecture only; programs (protoc, the gRPC
# plugin) are the build machine's.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
# Emulated runs of test programs (try_run, ctest) go through qemu.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static)
