// The protobuf wire format, written by hand: varints, zigzag, fixed64, length-delimited fields and packed repeated
// fields. The preload cannot link libprotobuf (Debian's static one is not position-independent, and a second
// libprotobuf inside PyTorch or TensorFlow processes clashes), so this is how it writes trace.proto messages.
// tests/conformance proves the output parses with protoc's classes into exactly the intended messages.
//
// Nested messages and packed fields are written in place: the length is first given one byte, and the body is
// moved up afterwards in the rare case that it needs more. The encoder never allocates; when its buffer cannot
// grow, writes are dropped and buffer().ok() turns false.
#ifndef CUMEMTRACE_PRELOAD_WIRE_ENCODER_H_
#define CUMEMTRACE_PRELOAD_WIRE_ENCODER_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "preload/byte_buffer.h"

namespace cumemtrace::preload {

inline constexpr size_t kMaxVarintBytes = 10;

inline size_t VarintSize(uint64_t value) {
  size_t n = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++n;
  }
  return n;
}

inline uint8_t* WriteVarintTo(uint8_t* p, uint64_t value) {
  while (value >= 0x80) {
    *p++ = static_cast<uint8_t>(value) | 0x80;
    value >>= 7;
  }
  *p++ = static_cast<uint8_t>(value);
  return p;
}

inline uint64_t ZigZag(int64_t value) {
  return (static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63);
}

class WireEncoder {
 public:
  enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

  explicit WireEncoder(ByteBuffer* buffer) : buffer_(buffer) {}

  ByteBuffer& buffer() { return *buffer_; }

  void RawVarint(uint64_t value) {
    uint8_t* p = buffer_->Reserve(kMaxVarintBytes);
    if (p == nullptr) return;
    buffer_->Commit(static_cast<size_t>(WriteVarintTo(p, value) - p));
  }
  void Tag(uint32_t field, WireType type) { RawVarint((static_cast<uint64_t>(field) << 3) | type); }

  // Scalars are written even when zero only if `always` is set (proto3 readers treat absent as zero).
  void Uint64(uint32_t field, uint64_t value) {
    if (value == 0) return;
    Tag(field, kVarint);
    RawVarint(value);
  }
  void Int64(uint32_t field, int64_t value) { Uint64(field, static_cast<uint64_t>(value)); }
  // int32 fields are sign-extended to 64 bits on the wire, as protobuf does.
  void Int32(uint32_t field, int32_t value) { Uint64(field, static_cast<uint64_t>(static_cast<int64_t>(value))); }
  void Bool(uint32_t field, bool value) { Uint64(field, value ? 1 : 0); }
  // For proto3 `optional` fields: present even when zero.
  void Int32Always(uint32_t field, int32_t value) {
    Tag(field, kVarint);
    RawVarint(static_cast<uint64_t>(static_cast<int64_t>(value)));
  }
  void Fixed64(uint32_t field, uint64_t value) {
    Tag(field, kFixed64);
    uint8_t* p = buffer_->Reserve(8);
    if (p == nullptr) return;
    memcpy(p, &value, 8);  // x86-64 and aarch64 are little-endian, as the wire format is
    buffer_->Commit(8);
  }
  // Written even when zero (for proto3 `optional` fields).
  void Fixed32(uint32_t field, uint32_t value) {
    Tag(field, kFixed32);
    uint8_t* p = buffer_->Reserve(4);
    if (p == nullptr) return;
    memcpy(p, &value, 4);
    buffer_->Commit(4);
  }
  void Bytes(uint32_t field, const void* data, size_t size) {
    Tag(field, kLengthDelimited);
    RawVarint(size);
    buffer_->Append(data, size);
  }
  void String(uint32_t field, const char* text) { Bytes(field, text, text == nullptr ? 0 : strlen(text)); }

  // A nested message or a packed repeated field: Begin returns a mark to hand to End once the body is written.
  size_t Begin(uint32_t field) {
    Tag(field, kLengthDelimited);
    size_t mark = buffer_->size();
    uint8_t* p = buffer_->Reserve(1);
    if (p != nullptr) buffer_->Commit(1);
    return mark;
  }
  void End(size_t mark) {
    ByteBuffer& b = *buffer_;
    if (!b.ok()) return;
    size_t body = b.size() - mark - 1;
    size_t len_bytes = VarintSize(body);
    if (len_bytes > 1) {
      if (b.Reserve(len_bytes - 1) == nullptr) return;
      memmove(b.data() + mark + len_bytes, b.data() + mark + 1, body);
      b.Commit(len_bytes - 1);
    }
    WriteVarintTo(b.data() + mark, body);
  }

 private:
  ByteBuffer* buffer_;
};

}  // namespace cumemtrace::preload

#endif  // CUMEMTRACE_PRELOAD_WIRE_ENCODER_H_
