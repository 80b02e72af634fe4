// static_library(): LLVM's archive writer (what llvm-ar uses) over in-memory kernel objects.
#include "codegen/archive.h"

#include <llvm/Object/Archive.h>
#include <llvm/Object/ArchiveWriter.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/MemoryBuffer.h>

#include <memory>
#include <set>

#include "support/error.h"

namespace ktune::codegen {

std::vector<uint8_t> static_library(const std::vector<Artifact>& artifacts) {
  if (artifacts.empty())
    throw Error(ErrorKind::kInvalidArgument, "a static library needs at least one kernel");
  std::vector<std::string> names;  // own the member names: NewArchiveMember keeps a StringRef
  std::set<std::string> seen;
  for (const Artifact& a : artifacts) {
    if (!seen.insert(a.entry).second)
      throw Error(ErrorKind::kInvalidArgument, "two kernels of one library are named " + a.entry);
    names.push_back(a.entry + ".o");
  }
  std::vector<llvm::NewArchiveMember> members;
  for (size_t i = 0; i < artifacts.size(); ++i) {
    const auto& object = artifacts[i].object;
    const llvm::StringRef bytes(reinterpret_cast<const char*>(object.data()), object.size());
    members.emplace_back(llvm::MemoryBufferRef(bytes, names[i]));
    members.back().MemberName = names[i];
  }
  std::string warnings;
  auto archive = llvm::writeArchiveToBuffer(
      members, llvm::SymtabWritingMode::NormalSymtab, llvm::object::Archive::K_GNU,
      /*Deterministic=*/true, /*Thin=*/false,
      [&](llvm::Error e) { warnings += llvm::toString(std::move(e)); });
  if (!archive)
    throw Error(ErrorKind::kBuild,
                "cannot write the static library: " + llvm::toString(archive.takeError()));
  if (!warnings.empty())
    throw Error(ErrorKind::kBuild, "cannot write the static library: " + warnings);
  const llvm::StringRef out = (*archive)->getBuffer();
  return std::vector<uint8_t>(out.begin(), out.end());
}

}  // namespace ktune::codegen
