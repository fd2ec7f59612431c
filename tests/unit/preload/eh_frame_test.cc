// The .eh_frame reader: rules read from hand-made call frame information (every instruction kind the walker
// relies on, and those it must refuse), and no read outside the given bounds on damaged copies of real tables.
#include "preload/eh_frame.h"

#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace cumemtrace::preload {
namespace {

// Builds a module image: .eh_frame_hdr, then .eh_frame with CIEs and FDEs, addresses relative to the buffer.
class ImageBuilder {
 public:
  // A CIE with augmentation `augmentation` ("zR" or "zRS") and the usual x86-64 initial rules; returns its offset.
  size_t Cie(const char* augmentation) {
    const size_t start = Begin();
    U32(0);  // CIE id
    bytes_.push_back(1);
    for (const char* c = augmentation; *c != '\0'; ++c) bytes_.push_back(static_cast<uint8_t>(*c));
    bytes_.push_back(0);
    bytes_.insert(bytes_.end(), {0x01, 0x78, 0x10});  // code align 1, data align -8, return address column 16
    bytes_.insert(bytes_.end(), {0x01, 0x1b});        // augmentation data: FDE pointers pcrel sdata4
    bytes_.insert(bytes_.end(), {0x0c, 0x07, 0x08});  // DW_CFA_def_cfa rsp+8
    bytes_.insert(bytes_.end(), {0x90, 0x01});        // DW_CFA_offset r16 (return address) at cfa-8
    End(start);
    return start;
  }
  // An FDE for [function_offset, function_offset + range) of the code, `code` its instructions.
  void Fde(size_t cie, uint32_t function_offset, uint32_t range, std::vector<uint8_t> code) {
    const size_t start = Begin();
    U32(static_cast<uint32_t>(bytes_.size() - cie));
    fdes_.push_back({function_offset, start});
    const size_t field = bytes_.size();
    pc_fields_.push_back({field, function_offset});
    U32(0);  // patched once the code's address is known
    U32(range);
    bytes_.push_back(0);  // augmentation data length
    bytes_.insert(bytes_.end(), code.begin(), code.end());
    End(start);
  }

  // Lays the image out in `memory`: header at 0, .eh_frame after it, code addresses from code_base on.
  EhFrameModule Build(std::vector<uint8_t>* memory, uintptr_t* code_base) {
    const size_t header = 4 + 4 + 4 + fdes_.size() * 8;
    memory->assign(header + bytes_.size(), 0);
    uint8_t* base = memory->data();
    *code_base = reinterpret_cast<uintptr_t>(base) + 0x100000;
    memcpy(base + header, bytes_.data(), bytes_.size());
    for (const auto& [field, function_offset] : pc_fields_) {
      const uintptr_t at = reinterpret_cast<uintptr_t>(base + header + field);
      const int32_t value = static_cast<int32_t>(*code_base + function_offset - at);
      memcpy(base + header + field, &value, 4);
    }
    base[0] = 1;
    base[1] = 0x1b;  // eh_frame_ptr: pcrel sdata4
    base[2] = 0x03;  // fde_count: udata4
    base[3] = 0x3b;  // table: datarel sdata4
    const int32_t eh_frame = static_cast<int32_t>(header - 4);
    memcpy(base + 4, &eh_frame, 4);
    const uint32_t count = static_cast<uint32_t>(fdes_.size());
    memcpy(base + 8, &count, 4);
    for (size_t i = 0; i < fdes_.size(); ++i) {  // added in address order by the tests
      const int32_t start = static_cast<int32_t>(*code_base + fdes_[i].function_offset -
                                                 reinterpret_cast<uintptr_t>(base));
      const int32_t fde = static_cast<int32_t>(header + fdes_[i].offset);
      memcpy(base + 12 + i * 8, &start, 4);
      memcpy(base + 16 + i * 8, &fde, 4);
    }
    EhFrameModule module;
    module.hdr = base;
    module.hdr_size = header;
    module.readable_start = reinterpret_cast<uintptr_t>(base);
    module.readable_end = module.readable_start + memory->size();
    return module;
  }

 private:
  struct FdeEntry {
    uint32_t function_offset;
    size_t offset;
  };
  size_t Begin() {
    const size_t start = bytes_.size();
    U32(0);  // length, patched by End
    return start;
  }
  void End(size_t start) {
    const uint32_t length = static_cast<uint32_t>(bytes_.size() - start - 4);
    memcpy(&bytes_[start], &length, 4);
  }
  void U32(uint32_t value) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&value);
    bytes_.insert(bytes_.end(), p, p + 4);
  }

  std::vector<uint8_t> bytes_;
  std::vector<FdeEntry> fdes_;
  std::vector<std::pair<size_t, uint32_t>> pc_fields_;
};

void ExpectStep(const FrameRule& rule, bool from_rbp, int32_t cfa_offset, bool rbp_saved, int32_t rbp_offset) {
  ASSERT_EQ(rule.kind, FrameRule::kStep);
  EXPECT_EQ(rule.cfa_from_rbp, from_rbp);
  EXPECT_EQ(rule.cfa_offset, cfa_offset);
  EXPECT_EQ(rule.rbp_saved, rbp_saved);
  if (rbp_saved) {
    EXPECT_EQ(rule.rbp_offset, rbp_offset);
  }
}

TEST(EhFrameTest, RulesOfAFramePointerFunctionRowByRow) {
  ImageBuilder b;
  const size_t cie = b.Cie("zR");
  b.Fde(cie, 0x0, 0x100,
        {0x41, 0x0e, 0x10, 0x86, 0x02,  // +1: cfa rsp+16, rbp at cfa-16
         0x43, 0x0d, 0x06,              // +4: cfa rbp+16
         0x0a,                          // remember
         0x02, 0x4c, 0x0c, 0x07, 0x08,  // +0x50: cfa rsp+8 (the epilogue)
         0x41, 0x0b});                  // +0x51: restore: cfa rbp+16 again
  std::vector<uint8_t> memory;
  uintptr_t code = 0;
  const EhFrameModule m = b.Build(&memory, &code);
  ExpectStep(FindFrameRule(m, code + 0x0), false, 8, false, 0);
  ExpectStep(FindFrameRule(m, code + 0x2), false, 16, true, -16);
  ExpectStep(FindFrameRule(m, code + 0x10), true, 16, true, -16);
  ExpectStep(FindFrameRule(m, code + 0x50), false, 8, true, -16);
  ExpectStep(FindFrameRule(m, code + 0x51), true, 16, true, -16);
  ExpectStep(FindFrameRule(m, code + 0xff), true, 16, true, -16);
  EXPECT_EQ(FindFrameRule(m, code + 0x100).kind, FrameRule::kUnsupported) << "past the function";
  EXPECT_EQ(FindFrameRule(m, code - 1).kind, FrameRule::kUnsupported) << "before every function";
}

TEST(EhFrameTest, SignalFramesExpressionsAndOtherRegistersAreRefused) {
  ImageBuilder b;
  const size_t plain = b.Cie("zR");
  const size_t signal = b.Cie("zRS");
  b.Fde(signal, 0x000, 0x10, {});
  b.Fde(plain, 0x100, 0x10, {0x0f, 0x02, 0x77, 0x08});  // DW_CFA_def_cfa_expression
  b.Fde(plain, 0x200, 0x10, {0x0c, 0x0a, 0x10});        // DW_CFA_def_cfa r10+16 (stack realignment)
  b.Fde(plain, 0x300, 0x10, {0x10, 0x06, 0x02, 0x77, 0x00});  // DW_CFA_expression for rbp
  b.Fde(plain, 0x400, 0x10, {0x07, 0x10});              // DW_CFA_undefined r16: the outermost frame
  b.Fde(plain, 0x500, 0x10, {0x25});                    // an opcode in the vendor range it does not know
  b.Fde(plain, 0x600, 0x10, {0x0b});                    // restore_state with nothing remembered
  std::vector<uint8_t> memory;
  uintptr_t code = 0;
  const EhFrameModule m = b.Build(&memory, &code);
  EXPECT_EQ(FindFrameRule(m, code + 0x004).kind, FrameRule::kUnsupported);
  EXPECT_EQ(FindFrameRule(m, code + 0x104).kind, FrameRule::kUnsupported);
  EXPECT_EQ(FindFrameRule(m, code + 0x204).kind, FrameRule::kUnsupported);
  EXPECT_EQ(FindFrameRule(m, code + 0x304).kind, FrameRule::kUnsupported);
  EXPECT_EQ(FindFrameRule(m, code + 0x404).kind, FrameRule::kOutermost);
  EXPECT_EQ(FindFrameRule(m, code + 0x504).kind, FrameRule::kUnsupported);
  EXPECT_EQ(FindFrameRule(m, code + 0x604).kind, FrameRule::kUnsupported);
  EXPECT_EQ(FindFrameRule(m, code + 0x0f0).kind, FrameRule::kUnsupported) << "between functions";
}

struct RealTables {
  EhFrameModule module;
  uintptr_t text_start = 0, text_end = 0;
};

int FindOwnTables(dl_phdr_info* info, size_t, void* data) {
  auto* tables = static_cast<RealTables*>(data);
  const uintptr_t here = reinterpret_cast<uintptr_t>(&FindOwnTables);
  const ElfW(Phdr)* hdr = nullptr;
  bool mine = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) != 0 && here >= start && here < start + ph.p_memsz) {
      mine = true;
      tables->text_start = start;
      tables->text_end = start + ph.p_memsz;
    }
    if (ph.p_type == PT_GNU_EH_FRAME) hdr = &ph;
  }
  if (!mine || hdr == nullptr) return 0;
  const uintptr_t at = info->dlpi_addr + hdr->p_vaddr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && at >= start && at < start + ph.p_memsz) {
      tables->module.hdr = reinterpret_cast<const uint8_t*>(at);
      tables->module.hdr_size = hdr->p_memsz;
      tables->module.readable_start = start;
      tables->module.readable_end = start + ph.p_memsz;
    }
  }
  return 1;
}

// This test binary's own tables, copied between two inaccessible pages and damaged byte by byte: any read outside
// the bounds FindFrameRule was given faults.
TEST(EhFrameTest, DamagedTablesAreNeverReadOutsideTheirBounds) {
  RealTables real;
  dl_iterate_phdr(FindOwnTables, &real);
  ASSERT_NE(real.module.hdr, nullptr);
  int standard = 0;
  for (uintptr_t pc = real.text_start; pc < real.text_end; pc += 97) {
    standard += FindFrameRule(real.module, pc).kind == FrameRule::kStep ? 1 : 0;
  }
  EXPECT_GT(standard, 100) << "most of a compiled program's code has standard frames";

  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t size = real.module.readable_end - real.module.readable_start;
  const size_t data_pages = (size + page - 1) / page;
  const size_t total = (data_pages + 2) * page;
  void* mapping = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mapping, MAP_FAILED);
  uint8_t* data = static_cast<uint8_t*>(mapping) + page + (data_pages * page - size);  // ends at the guard page
  ASSERT_EQ(mprotect(static_cast<uint8_t*>(mapping) + page, data_pages * page, PROT_READ | PROT_WRITE), 0);
  const uint8_t* original = reinterpret_cast<const uint8_t*>(real.module.readable_start);
  EhFrameModule copy = real.module;
  copy.hdr = data + (reinterpret_cast<uintptr_t>(real.module.hdr) - real.module.readable_start);
  copy.readable_start = reinterpret_cast<uintptr_t>(data);
  copy.readable_end = copy.readable_start + size;
  // The tables' own region (header and .eh_frame): where damage changes what is parsed.
  const size_t tables_from = static_cast<size_t>(copy.hdr - data);
  std::mt19937_64 random(20261124);
  for (int round = 0; round < 300; ++round) {
    memcpy(data, original, size);
    for (int flips = 0; flips < 64; ++flips) {
      const size_t at = tables_from + random() % (size - tables_from);
      data[at] = static_cast<uint8_t>(random());
    }
    for (int i = 0; i < 64; ++i) {
      const uintptr_t pc = real.text_start + random() % (real.text_end - real.text_start);
      const uintptr_t shifted = pc - reinterpret_cast<uintptr_t>(original) + reinterpret_cast<uintptr_t>(data);
      FindFrameRule(copy, shifted);  // the code addresses moved with the copy (pcrel encodings)
    }
  }
  munmap(mapping, total);
}

}  // namespace
}  // namespace cumemtrace::preload
