#include "preload/python_line_table.h"

namespace cumemtrace::preload {
namespace {

// 3.10: each pair covers the next `length` bytes of bytecode (an unsigned byte) and moves the line by a signed byte,
// where -128 means "these bytes have no line" and leaves the running line where it was. Ranges of length 0 only
// move the line. An instruction at byte `address` takes the line of the range that covers it.
uint32_t DecodeAddressPairs(const uint8_t* table, size_t size, int first_line, int32_t instr) {
  if (instr < 0) return first_line > 0 ? static_cast<uint32_t>(first_line) : 0;  // a frame not yet started
  const int64_t address = static_cast<int64_t>(instr) * 2;
  int64_t line = first_line;
  int64_t end = 0;
  for (size_t i = 0; i + 1 < size; i += 2) {
    const int64_t start = end;
    end += table[i];
    const int8_t delta = static_cast<int8_t>(table[i + 1]);
    const bool has_line = delta != -128;
    if (has_line) line += delta;
    if (address >= start && address < end) return has_line && line > 0 ? static_cast<uint32_t>(line) : 0;
  }
  return 0;
}

uint32_t ReadVarint(const uint8_t*& p, const uint8_t* end) {
  if (p >= end) return 0;
  uint32_t read = *p++;
  uint32_t value = read & 63;
  uint32_t shift = 0;
  while ((read & 64) != 0 && p < end && shift < 30) {
    read = *p++;
    shift += 6;
    value |= (read & 63) << shift;
  }
  return value;
}

int32_t ReadSignedVarint(const uint8_t*& p, const uint8_t* end) {
  uint32_t value = ReadVarint(p, end);
  return (value & 1) != 0 ? -static_cast<int32_t>(value >> 1) : static_cast<int32_t>(value >> 1);
}

// 3.11+: each entry starts with a byte whose top bit is set, holding a form code (bits 3-6) and the number of code
// units it covers minus one (bits 0-2); the form says how the line moves and how many bytes of columns follow.
uint32_t DecodeLocations(const uint8_t* table, size_t size, int first_line, int32_t instr) {
  const uint8_t* p = table;
  const uint8_t* end = table + size;
  int32_t line = first_line;
  int32_t address = 0;  // code units
  while (p < end) {
    const uint8_t head = *p++;
    if ((head & 0x80) == 0) return 0;  // not at the start of an entry: the table is not what we think
    const int code = (head >> 3) & 15;
    const int32_t length = (head & 7) + 1;
    bool has_line = true;
    switch (code) {
      case 15:  // no location
        has_line = false;
        break;
      case 14:  // long form: line delta, end line delta, column, end column
        line += ReadSignedVarint(p, end);
        ReadVarint(p, end);
        ReadVarint(p, end);
        ReadVarint(p, end);
        break;
      case 13:  // no column: line delta
        line += ReadSignedVarint(p, end);
        break;
      case 10:
      case 11:
      case 12:  // one-line forms: line delta code - 10, then column and end column bytes
        line += code - 10;
        p += 2;
        break;
      default:  // short forms: same line, one column byte
        p += 1;
        break;
    }
    if (instr >= address && instr < address + length) return has_line && line > 0 ? static_cast<uint32_t>(line) : 0;
    address += length;
  }
  return 0;
}

}  // namespace

uint32_t DecodeLine(LineTableFormat format, const uint8_t* table, size_t size, int first_line, int32_t instr) {
  return format == LineTableFormat::kAddressPairs ? DecodeAddressPairs(table, size, first_line, instr)
                                                  : DecodeLocations(table, size, first_line, instr);
}

}  // namespace cumemtrace::preload
