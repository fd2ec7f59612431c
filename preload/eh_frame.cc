#include "preload/eh_frame.h"

#include <string.h>

namespace cumemtrace::preload {
namespace {

// DWARF register numbers of x86-64 (System V psABI, figure 3.36).
constexpr uint64_t kRbp = 6;
constexpr uint64_t kRsp = 7;
constexpr uint64_t kReturnAddress = 16;

// Pointer encodings (LSB, "DWARF Extensions"): the low nibble is the format, the next three bits the base.
constexpr uint8_t kEncOmit = 0xff;
constexpr uint8_t kEncAbsPtr = 0x00;
constexpr uint8_t kEncUleb128 = 0x01;
constexpr uint8_t kEncUdata2 = 0x02;
constexpr uint8_t kEncUdata4 = 0x03;
constexpr uint8_t kEncUdata8 = 0x04;
constexpr uint8_t kEncSleb128 = 0x09;
constexpr uint8_t kEncSdata2 = 0x0a;
constexpr uint8_t kEncSdata4 = 0x0b;
constexpr uint8_t kEncSdata8 = 0x0c;
constexpr uint8_t kEncPcRel = 0x10;
constexpr uint8_t kEncDataRel = 0x30;
constexpr uint8_t kEncIndirect = 0x80;

// Bounds-checked reads of mapped memory: any read past `end` makes the reader fail for good.
class Reader {
 public:
  Reader(uintptr_t at, uintptr_t end) : at_(at), end_(end) {}

  bool ok() const { return ok_; }
  uintptr_t at() const { return at_; }
  bool AtEnd() const { return at_ >= end_; }

  template <typename T>
  T Fixed() {
    T value{};
    if (!Take(sizeof(T))) return value;
    memcpy(&value, reinterpret_cast<const void*>(at_ - sizeof(T)), sizeof(T));
    return value;
  }
  uint64_t Uleb() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const uint8_t byte = Fixed<uint8_t>();
      if (!ok_) return 0;
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    ok_ = false;
    return 0;
  }
  int64_t Sleb() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const uint8_t byte = Fixed<uint8_t>();
      if (!ok_) return 0;
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        if (shift + 7 < 64 && (byte & 0x40) != 0) value |= ~uint64_t{0} << (shift + 7);
        return static_cast<int64_t>(value);
      }
    }
    ok_ = false;
    return 0;
  }
  // A NUL-terminated string: returns its start.
  const char* String() {
    const uintptr_t start = at_;
    while (ok_ && Fixed<uint8_t>() != 0) {
    }
    return ok_ ? reinterpret_cast<const char*>(start) : "";
  }
  bool Skip(uint64_t bytes) { return Take(bytes); }
  // An encoded pointer; `data_base` is the base of datarel (the .eh_frame_hdr), 0 where it has none.
  bool Encoded(uint8_t encoding, uintptr_t data_base, uintptr_t* out) {
    const uintptr_t field = at_;
    uint64_t value = 0;
    switch (encoding & 0x0f) {
      case kEncAbsPtr: value = Fixed<uint64_t>(); break;
      case kEncUleb128: value = Uleb(); break;
      case kEncUdata2: value = Fixed<uint16_t>(); break;
      case kEncUdata4: value = Fixed<uint32_t>(); break;
      case kEncUdata8: value = Fixed<uint64_t>(); break;
      case kEncSleb128: value = static_cast<uint64_t>(Sleb()); break;
      case kEncSdata2: value = static_cast<uint64_t>(static_cast<int64_t>(Fixed<int16_t>())); break;
      case kEncSdata4: value = static_cast<uint64_t>(static_cast<int64_t>(Fixed<int32_t>())); break;
      case kEncSdata8: value = Fixed<uint64_t>(); break;
      default: ok_ = false; return false;
    }
    switch (encoding & 0x70) {
      case 0: break;
      case kEncPcRel: value += field; break;
      case kEncDataRel:
        if (data_base == 0) ok_ = false;
        value += data_base;
        break;
      default: ok_ = false;  // textrel, funcrel, aligned: never seen in .eh_frame of x86-64 Linux
    }
    if ((encoding & kEncIndirect) != 0) ok_ = false;
    *out = static_cast<uintptr_t>(value);
    return ok_;
  }

 private:
  bool Take(uint64_t bytes) {
    if (!ok_ || bytes > end_ - at_ || at_ > end_) {
      ok_ = false;
      return false;
    }
    at_ += bytes;
    return true;
  }

  uintptr_t at_;
  uintptr_t end_;
  bool ok_ = true;
};

// How one register is recovered in the caller.
struct RegisterRule {
  enum How : uint8_t { kSame, kUndefined, kAtCfaOffset, kOther };
  How how = kSame;
  int64_t offset = 0;
};

struct RowState {
  uint64_t cfa_register = kRsp;
  int64_t cfa_offset = 8;
  bool cfa_is_expression = false;
  RegisterRule rbp, rsp, return_address;

  // The rule of `reg`, nullptr for a register that does not matter to a standard frame (its rules are skipped).
  RegisterRule* Rule(uint64_t reg) {
    return reg == kRbp ? &rbp : reg == kRsp ? &rsp : reg == kReturnAddress ? &return_address : nullptr;
  }
  RegisterRule Initial(uint64_t reg) const {
    return reg == kRbp ? rbp : reg == kRsp ? rsp : reg == kReturnAddress ? return_address : RegisterRule{};
  }
};

struct Cie {
  uint64_t code_align = 1;
  int64_t data_align = 1;
  uint64_t return_address_register = kReturnAddress;
  uint8_t fde_encoding = kEncAbsPtr;
  bool has_augmentation_data = false;
  bool signal_frame = false;
  uintptr_t instructions = 0;
  uintptr_t end = 0;
};

// Reads the CIE at `at`. False for anything unexpected.
bool ReadCie(uintptr_t at, uintptr_t readable_end, Cie* cie) {
  Reader r(at, readable_end);
  const uint32_t length = r.Fixed<uint32_t>();
  if (!r.ok() || length == 0 || length == 0xffffffffu) return false;
  Reader body(r.at(), r.at() + length);
  if (r.at() + length > readable_end) return false;
  if (body.Fixed<uint32_t>() != 0) return false;  // a CIE's id is 0 in .eh_frame
  const uint8_t version = body.Fixed<uint8_t>();
  if (version != 1 && version != 3) return false;
  const char* augmentation = body.String();
  if (!body.ok()) return false;
  if (augmentation[0] != '\0' && augmentation[0] != 'z') return false;  // e.g. the ancient "eh"
  cie->code_align = body.Uleb();
  cie->data_align = body.Sleb();
  cie->return_address_register = version == 1 ? body.Fixed<uint8_t>() : body.Uleb();
  if (augmentation[0] == 'z') {
    cie->has_augmentation_data = true;
    const uint64_t size = body.Uleb();
    Reader data(body.at(), body.at() + size);
    if (!body.Skip(size)) return false;
    for (const char* c = augmentation + 1; *c != '\0'; ++c) {
      switch (*c) {
        case 'L': data.Fixed<uint8_t>(); break;  // the LSDA's encoding: only FDEs carry an LSDA
        case 'P': {
          const uint8_t encoding = data.Fixed<uint8_t>();
          uintptr_t ignored = 0;
          // The personality routine's address: read (and so skipped) as absolute, its base does not matter here.
          if (!data.Encoded(static_cast<uint8_t>(encoding & 0x0f), 0, &ignored)) return false;
          break;
        }
        case 'R': cie->fde_encoding = data.Fixed<uint8_t>(); break;
        case 'S': cie->signal_frame = true; break;
        default: return false;
      }
      if (!data.ok()) return false;
    }
  }
  if (!body.ok()) return false;
  cie->instructions = body.at();
  cie->end = at + 4 + length;
  return true;
}

// Runs call frame instructions [at, end) into `row` until the location passes `pc`. `initial` is the row after
// the CIE's instructions (for DW_CFA_restore). False for an instruction this reader does not take.
bool RunInstructions(uintptr_t at, uintptr_t end, const Cie& cie, uintptr_t pc, uintptr_t* location,
                     RowState* row, const RowState& initial) {
  constexpr int kMaxRemembered = 16;
  RowState remembered[kMaxRemembered];
  int remembered_count = 0;
  Reader r(at, end);
  while (!r.AtEnd()) {
    const uint8_t op = r.Fixed<uint8_t>();
    if (!r.ok()) return false;
    uint64_t advance = 0;
    bool advances = false;
    const uint8_t high = op & 0xc0, low = op & 0x3f;
    if (high == 0x40) {  // DW_CFA_advance_loc
      advance = low * cie.code_align;
      advances = true;
    } else if (high == 0x80) {  // DW_CFA_offset
      const int64_t offset = static_cast<int64_t>(r.Uleb()) * cie.data_align;
      if (RegisterRule* rule = row->Rule(low)) *rule = {RegisterRule::kAtCfaOffset, offset};
    } else if (high == 0xc0) {  // DW_CFA_restore
      if (RegisterRule* rule = row->Rule(low)) *rule = initial.Initial(low);
    } else {
      switch (op) {
        case 0x00: break;  // DW_CFA_nop
        case 0x01: {       // DW_CFA_set_loc
          uintptr_t to = 0;
          if (!r.Encoded(cie.fde_encoding, 0, &to)) return false;
          if (to > pc) return true;
          *location = to;
          break;
        }
        case 0x02: advance = r.Fixed<uint8_t>() * cie.code_align; advances = true; break;
        case 0x03: advance = r.Fixed<uint16_t>() * cie.code_align; advances = true; break;
        case 0x04: advance = r.Fixed<uint32_t>() * cie.code_align; advances = true; break;
        case 0x05: {  // DW_CFA_offset_extended
          const uint64_t reg = r.Uleb();
          const int64_t offset = static_cast<int64_t>(r.Uleb()) * cie.data_align;
          if (RegisterRule* rule = row->Rule(reg)) *rule = {RegisterRule::kAtCfaOffset, offset};
          break;
        }
        case 0x06: {  // DW_CFA_restore_extended
          const uint64_t reg = r.Uleb();
          if (RegisterRule* rule = row->Rule(reg)) *rule = initial.Initial(reg);
          break;
        }
        case 0x07:    // DW_CFA_undefined
        case 0x08: {  // DW_CFA_same_value
          const uint64_t reg = r.Uleb();
          if (RegisterRule* rule = row->Rule(reg)) {
            *rule = {op == 0x07 ? RegisterRule::kUndefined : RegisterRule::kSame, 0};
          }
          break;
        }
        case 0x09: {  // DW_CFA_register
          const uint64_t reg = r.Uleb();
          r.Uleb();
          if (RegisterRule* rule = row->Rule(reg)) *rule = {RegisterRule::kOther, 0};
          break;
        }
        case 0x0a:  // DW_CFA_remember_state
          if (remembered_count == kMaxRemembered) return false;
          remembered[remembered_count++] = *row;
          break;
        case 0x0b:  // DW_CFA_restore_state
          if (remembered_count == 0) return false;
          *row = remembered[--remembered_count];
          break;
        case 0x0c:  // DW_CFA_def_cfa
          row->cfa_register = r.Uleb();
          row->cfa_offset = static_cast<int64_t>(r.Uleb());
          row->cfa_is_expression = false;
          break;
        case 0x0d:  // DW_CFA_def_cfa_register
          row->cfa_register = r.Uleb();
          row->cfa_is_expression = false;
          break;
        case 0x0e:  // DW_CFA_def_cfa_offset
          row->cfa_offset = static_cast<int64_t>(r.Uleb());
          break;
        case 0x0f:  // DW_CFA_def_cfa_expression
          row->cfa_is_expression = true;
          r.Skip(r.Uleb());
          break;
        case 0x10:    // DW_CFA_expression
        case 0x16: {  // DW_CFA_val_expression
          const uint64_t reg = r.Uleb();
          r.Skip(r.Uleb());
          if (RegisterRule* rule = row->Rule(reg)) *rule = {RegisterRule::kOther, 0};
          break;
        }
        case 0x11: {  // DW_CFA_offset_extended_sf
          const uint64_t reg = r.Uleb();
          const int64_t offset = r.Sleb() * cie.data_align;
          if (RegisterRule* rule = row->Rule(reg)) *rule = {RegisterRule::kAtCfaOffset, offset};
          break;
        }
        case 0x12:  // DW_CFA_def_cfa_sf
          row->cfa_register = r.Uleb();
          row->cfa_offset = r.Sleb() * cie.data_align;
          row->cfa_is_expression = false;
          break;
        case 0x13:  // DW_CFA_def_cfa_offset_sf
          row->cfa_offset = r.Sleb() * cie.data_align;
          break;
        case 0x14:    // DW_CFA_val_offset
        case 0x15: {  // DW_CFA_val_offset_sf
          const uint64_t reg = r.Uleb();
          if (op == 0x14) r.Uleb(); else r.Sleb();
          if (RegisterRule* rule = row->Rule(reg)) *rule = {RegisterRule::kOther, 0};
          break;
        }
        case 0x2e:  // DW_CFA_GNU_args_size
          r.Uleb();
          break;
        case 0x2f: {  // DW_CFA_GNU_negative_offset_extended
          const uint64_t reg = r.Uleb();
          const int64_t offset = -static_cast<int64_t>(r.Uleb()) * cie.data_align;
          if (RegisterRule* rule = row->Rule(reg)) *rule = {RegisterRule::kAtCfaOffset, offset};
          break;
        }
        default:
          return false;
      }
    }
    if (!r.ok()) return false;
    if (advances) {
      if (advance > pc - *location) return true;  // the next row starts past pc: this row is pc's
      *location += advance;
    }
  }
  return true;
}

// The FDE whose range holds `pc`, by binary search of the header's sorted table. 0 when none.
uintptr_t FindFde(const EhFrameModule& module, uintptr_t pc) {
  const uintptr_t hdr = reinterpret_cast<uintptr_t>(module.hdr);
  Reader r(hdr, hdr + module.hdr_size);
  const uint8_t version = r.Fixed<uint8_t>();
  const uint8_t frame_pointer_encoding = r.Fixed<uint8_t>();
  const uint8_t count_encoding = r.Fixed<uint8_t>();
  const uint8_t table_encoding = r.Fixed<uint8_t>();
  if (!r.ok() || version != 1 || frame_pointer_encoding == kEncOmit || count_encoding == kEncOmit) return 0;
  uintptr_t ignored = 0, count = 0;
  if (!r.Encoded(frame_pointer_encoding, hdr, &ignored) || !r.Encoded(count_encoding, hdr, &count)) return 0;
  // Every linker writes the table as pairs of 4-byte offsets from the header; anything else goes to libunwind.
  if (table_encoding != (kEncDataRel | kEncSdata4) || count == 0) return 0;
  const uintptr_t table = r.at();
  if (count > (hdr + module.hdr_size - table) / 8) return 0;
  auto entry = [&](uintptr_t i, int field) {
    int32_t value;
    memcpy(&value, reinterpret_cast<const void*>(table + i * 8 + static_cast<uintptr_t>(field) * 4), 4);
    return hdr + static_cast<uintptr_t>(static_cast<intptr_t>(value));
  };
  if (pc < entry(0, 0)) return 0;
  uintptr_t low = 0, high = count;  // the answer is the last entry whose start <= pc, in [low, high)
  while (high - low > 1) {
    const uintptr_t mid = low + (high - low) / 2;
    if (entry(mid, 0) <= pc) low = mid; else high = mid;
  }
  return entry(low, 1);
}

}  // namespace

FrameRule FindFrameRule(const EhFrameModule& module, uintptr_t pc) {
  FrameRule unsupported;
  if (module.hdr == nullptr) return unsupported;
  const uintptr_t fde = FindFde(module, pc);
  if (fde < module.readable_start || fde >= module.readable_end) return unsupported;
  Reader r(fde, module.readable_end);
  const uint32_t length = r.Fixed<uint32_t>();
  if (!r.ok() || length == 0 || length == 0xffffffffu || length > module.readable_end - r.at()) {
    return unsupported;
  }
  const uintptr_t fde_end = r.at() + length;
  const uintptr_t cie_field = r.at();
  const uint32_t cie_offset = r.Fixed<uint32_t>();
  if (!r.ok() || cie_offset == 0 || cie_offset > cie_field - module.readable_start) return unsupported;
  Cie cie;
  if (!ReadCie(cie_field - cie_offset, module.readable_end, &cie) || cie.signal_frame) return unsupported;
  if (cie.return_address_register != kReturnAddress) return unsupported;
  uintptr_t pc_begin = 0, pc_range = 0;
  if (!r.Encoded(cie.fde_encoding, 0, &pc_begin) ||
      !r.Encoded(static_cast<uint8_t>(cie.fde_encoding & 0x0f), 0, &pc_range)) {
    return unsupported;
  }
  if (pc < pc_begin || pc - pc_begin >= pc_range) return unsupported;  // in a gap between functions
  if (cie.has_augmentation_data && !r.Skip(r.Uleb())) return unsupported;
  if (r.at() > fde_end) return unsupported;

  const RowState defaults;
  RowState row;
  uintptr_t location = pc_begin;
  if (!RunInstructions(cie.instructions, cie.end, cie, pc, &location, &row, defaults)) return unsupported;
  const RowState initial = row;
  location = pc_begin;
  if (!RunInstructions(r.at(), fde_end, cie, pc, &location, &row, initial)) return unsupported;

  if (row.cfa_is_expression || (row.cfa_register != kRsp && row.cfa_register != kRbp)) return unsupported;
  if (row.cfa_offset < INT32_MIN || row.cfa_offset > INT32_MAX) return unsupported;
  if (row.rsp.how != RegisterRule::kSame && row.rsp.how != RegisterRule::kUndefined) return unsupported;
  FrameRule rule;
  if (row.return_address.how == RegisterRule::kUndefined) {
    rule.kind = FrameRule::kOutermost;
    return rule;
  }
  if (row.return_address.how != RegisterRule::kAtCfaOffset || row.return_address.offset != -8) return unsupported;
  if (row.rbp.how == RegisterRule::kAtCfaOffset) {
    if (row.rbp.offset < INT32_MIN || row.rbp.offset > INT32_MAX) return unsupported;
    rule.rbp_saved = true;
    rule.rbp_offset = static_cast<int32_t>(row.rbp.offset);
  } else if (row.rbp.how != RegisterRule::kSame && row.rbp.how != RegisterRule::kUndefined) {
    return unsupported;
  }
  rule.kind = FrameRule::kStep;
  rule.cfa_from_rbp = row.cfa_register == kRbp;
  rule.cfa_offset = static_cast<int32_t>(row.cfa_offset);
  return rule;
}

}  // namespace cumemtrace::preload
