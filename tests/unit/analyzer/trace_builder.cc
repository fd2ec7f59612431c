// Test helper: trace files from the generated classes (trace_builder.h).
#include "tests/unit/analyzer/trace_builder.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <mutex>
#include <vector>

#include "gtest/gtest.h"

namespace cumemtrace::analyzer::test {
namespace {

// The files WriteTempFile made, removed when the test process ends unless a test failed (then they are what to
// look at): thousands of runs must not fill the temp folder.
class TempFiles {
 public:
  ~TempFiles() {
    if (::testing::UnitTest::GetInstance()->Failed()) return;
    for (const std::string& path : paths_) std::remove(path.c_str());
  }
  void Add(const std::string& path) {
    std::lock_guard<std::mutex> lock(mutex_);
    paths_.push_back(path);
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> paths_;
};

TempFiles& MadeFiles() {
  static TempFiles files;
  return files;
}

}  // namespace

Ev Alloc(uint64_t seq, double t_ms, uint64_t address, uint64_t size, uint64_t stack, format::Api api,
         int32_t device, uint32_t thread) {
  Ev e;
  e.seq = seq;
  e.time_ns = kStartNs + static_cast<int64_t>(t_ms * 1e6);
  e.api = api;
  e.device = device;
  e.address = address;
  e.size = size;
  e.stack = stack;
  e.thread = thread;
  return e;
}

Ev Free(uint64_t seq, double t_ms, uint64_t address, format::Api api, int32_t device, uint32_t thread) {
  Ev e;
  e.seq = seq;
  e.time_ns = kStartNs + static_cast<int64_t>(t_ms * 1e6);
  e.api = api;
  e.device = device;
  e.address = address;
  e.thread = thread;
  return e;
}

Ev Torch(uint64_t seq, double t_ms, format::Api api, uint64_t address, uint64_t size, uint64_t stack,
         int32_t device, uint64_t aux) {
  Ev e = Free(seq, t_ms, address, api, device);
  e.size = size;
  e.stack = stack;
  e.aux = aux;
  e.stream = 0x7;
  return e;
}

std::string Varint(uint64_t value) {
  std::string out;
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
  return out;
}

std::string Frame(const format::Packet& packet) {
  const std::string body = packet.SerializeAsString();
  return "\x0a" + Varint(body.size()) + body;
}

std::string WriteTempFile(const std::string& name, const std::string& bytes) {
  // CTest runs each test in its own process, several at once: a file per process keeps them from racing.
  const std::string path = ::testing::TempDir() + "/" + std::to_string(getpid()) + "_" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  MadeFiles().Add(path);
  return path;
}

format::Header TraceBuilder::DefaultHeader() {
  format::Header h;
  h.set_magic(format::kMagic);
  h.set_format_version(format::kFormatVersion);
  h.set_tool_version("0.1.0-test");
  h.set_pid(4242);
  h.set_ppid(1);
  h.add_argv("python");
  h.add_argv("train.py");
  h.set_hostname("testhost");
  h.set_clock_id(1);
  h.set_start_time_ns(kStartNs);
  h.set_start_unix_time_ns(kStartUnixNs);
  h.set_driver_version(13000);
  h.set_stack_depth(64);
  h.set_executable("/usr/bin/python3");
  return h;
}

TraceBuilder& TraceBuilder::Header(const format::Header& header) {
  format::Packet p;
  *p.mutable_header() = header;
  return Packet(p);
}

TraceBuilder& TraceBuilder::Device(int32_t ordinal, const std::string& name, uint64_t total_memory) {
  format::Packet p;
  p.mutable_device()->set_ordinal(ordinal);
  p.mutable_device()->set_name(name);
  p.mutable_device()->set_uuid(std::string("\x01\x02\xab", 3));
  p.mutable_device()->set_total_memory(total_memory);
  p.mutable_device()->set_driver_version(13000);
  return Packet(p);
}

TraceBuilder& TraceBuilder::Thread(uint32_t index, int32_t tid, const std::string& name) {
  format::Packet p;
  p.mutable_thread()->set_index(index);
  p.mutable_thread()->set_tid(tid);
  p.mutable_thread()->set_name(name);
  return Packet(p);
}

TraceBuilder& TraceBuilder::Module(uint32_t id, const std::string& path, uint64_t load_bias, uint64_t start,
                                   uint64_t end) {
  format::Packet p;
  format::Module* m = p.mutable_module();
  m->set_id(id);
  m->set_path(path);
  m->set_load_bias(load_bias);
  m->set_start(start);
  m->set_end(end);
  return Packet(p);
}

TraceBuilder& TraceBuilder::StackNodes(uint64_t first_id, const std::vector<uint64_t>& parents,
                                       const std::vector<uint64_t>& pcs) {
  format::Packet p;
  format::StackNodes* n = p.mutable_stack_nodes();
  n->set_first_id(first_id);
  for (uint64_t v : parents) n->add_parent(v);
  for (uint64_t v : pcs) n->add_pc(v);
  return Packet(p);
}

TraceBuilder& TraceBuilder::Strings(uint32_t first_id, const std::vector<std::string>& values) {
  format::Packet p;
  p.mutable_strings()->set_first_id(first_id);
  for (const std::string& v : values) p.mutable_strings()->add_value(v);
  return Packet(p);
}

TraceBuilder& TraceBuilder::Symbols(const std::vector<uint64_t>& pcs, const std::vector<uint32_t>& functions,
                                    const std::vector<uint32_t>& modules, const std::vector<uint64_t>& offsets) {
  format::Packet p;
  format::Symbols* s = p.mutable_symbols();
  for (uint64_t v : pcs) s->add_pc(v);
  for (uint32_t v : functions) s->add_function(v);
  for (uint32_t v : modules) s->add_module(v);
  for (uint64_t v : offsets) s->add_offset(v);
  return Packet(p);
}

TraceBuilder& TraceBuilder::SymbolsWithLines(const std::vector<uint64_t>& pcs, const std::vector<uint32_t>& functions,
                                             const std::vector<uint32_t>& modules,
                                             const std::vector<uint64_t>& offsets,
                                             const std::vector<uint32_t>& files, const std::vector<uint32_t>& lines) {
  format::Packet p;
  format::Symbols* s = p.mutable_symbols();
  for (uint64_t v : pcs) s->add_pc(v);
  for (uint32_t v : functions) s->add_function(v);
  for (uint32_t v : modules) s->add_module(v);
  for (uint64_t v : offsets) s->add_offset(v);
  for (uint32_t v : files) s->add_file(v);
  for (uint32_t v : lines) s->add_line(v);
  return Packet(p);
}

TraceBuilder& TraceBuilder::PythonFrames(uint32_t first_id, const std::vector<uint32_t>& functions,
                                         const std::vector<uint32_t>& files, const std::vector<uint32_t>& lines) {
  format::Packet p;
  format::PythonFrames* f = p.mutable_python_frames();
  f->set_first_id(first_id);
  for (uint32_t v : functions) f->add_function(v);
  for (uint32_t v : files) f->add_file(v);
  for (uint32_t v : lines) f->add_line(v);
  return Packet(p);
}

uint64_t TraceBuilder::Stack(const std::vector<uint64_t>& pcs) {
  // The prefix tree grows from the outermost frame: walk the stack from its end.
  std::vector<uint64_t> parents, new_pcs;
  uint64_t first_new = 0;
  uint64_t parent = 0;
  for (auto it = pcs.rbegin(); it != pcs.rend(); ++it) {
    auto [node, inserted] = nodes_.try_emplace({parent, *it}, next_node_);
    if (inserted) {
      if (first_new == 0) first_new = next_node_;
      parents.push_back(parent);
      new_pcs.push_back(*it);
      ++next_node_;
    }
    parent = node->second;
  }
  if (first_new != 0) StackNodes(first_new, parents, new_pcs);
  return parent;
}

format::EventBatch TraceBuilder::Encode(const std::vector<Ev>& events, const EncodeOptions& options) {
  format::EventBatch b;
  if (events.empty()) return b;
  b.set_first_seq(events[0].seq);
  b.set_base_time_ns(events[0].time_ns);
  bool consecutive = true;
  for (size_t i = 1; i < events.size(); ++i) consecutive &= events[i].seq == events[i - 1].seq + 1;
  if (!consecutive || options.explicit_seq) {
    for (size_t i = 0; i < events.size(); ++i) {
      b.add_seq_delta(static_cast<int64_t>(events[i].seq - (i == 0 ? events[0].seq : events[i - 1].seq)));
    }
  }
  bool same_thread = true, same_device = true, same_stack = true;
  const Ev* first_stack = nullptr;  // the first row whose api has a stack (format version 2's stack column)
  for (size_t i = 0; i < events.size(); ++i) {
    const Ev& e = events[i];
    b.add_time_delta_ns(e.time_ns - (i == 0 ? events[0].time_ns : events[i - 1].time_ns));
    b.add_api(static_cast<uint32_t>(e.api));
    b.add_address_delta(static_cast<int64_t>(e.address - (i == 0 ? 0 : events[i - 1].address)));
    const format::ApiInfo* info = format::FindApi(static_cast<uint32_t>(e.api));
    if (info != nullptr && info->has_size) b.add_size(e.size);
    if (info != nullptr && info->has_stream) b.add_stream(e.stream);
    if (info != nullptr && info->has_aux) b.add_aux(e.aux);
    same_thread &= e.thread == events[0].thread;
    same_device &= e.device == events[0].device;
    if (info == nullptr || format::RowHasStack(*info, format::kFormatVersion)) {
      if (first_stack == nullptr) first_stack = &e;
      same_stack &= e.stack == first_stack->stack;
    }
    if (e.result != 0) {
      format::Failure* f = b.add_failures();
      f->set_row(static_cast<uint32_t>(i));
      f->set_result(e.result);
      f->set_free_bytes(e.free_bytes);
      f->set_total_bytes(e.total_bytes);
      f->set_has_mem_info(e.has_mem_info);
    }
  }
  const bool per_row = options.per_row_columns;
  for (size_t i = 0; i < ((same_thread && !per_row) ? 1 : events.size()); ++i) b.add_thread(events[i].thread);
  for (size_t i = 0; i < ((same_device && !per_row) ? 1 : events.size()); ++i) b.add_device(events[i].device);
  if (first_stack != nullptr && same_stack && !per_row) {
    b.add_stack(first_stack->stack);
  } else {
    for (const Ev& e : events) {
      const format::ApiInfo* info = format::FindApi(static_cast<uint32_t>(e.api));
      if (info == nullptr || format::RowHasStack(*info, format::kFormatVersion)) b.add_stack(e.stack);
    }
  }
  return b;
}

TraceBuilder& TraceBuilder::Events(const std::vector<Ev>& events, const EncodeOptions& options) {
  return Batch(Encode(events, options));
}

TraceBuilder& TraceBuilder::Batch(const format::EventBatch& batch) {
  format::Packet p;
  *p.mutable_events() = batch;
  return Packet(p);
}

TraceBuilder& TraceBuilder::Trailer(uint64_t events, int64_t end_time_ns) {
  format::Packet p;
  format::Trailer* t = p.mutable_trailer();
  t->set_events(events);
  t->set_dropped_events(0);
  t->set_unwind_failures(2);
  t->set_truncated_stacks(1);
  t->set_bytes_written(bytes_.size());
  t->set_stack_nodes(7);
  t->set_end_time_ns(end_time_ns);
  t->set_recorder_time_ns(12345);
  t->set_recorder_python_ns(2001);
  t->set_recorder_unwind_ns(2002);
  t->set_recorder_lock_wait_ns(2003);
  t->set_recorder_stack_ns(2004);
  t->set_flushes(3);
  t->set_writer_time_ns(2005);
  t->set_stalled_seals(2006);
  t->set_clock_calibrations(2007);
  t->set_clock_max_error_ns(2008);
  t->set_clock_steps(2009);
  t->set_recorder_prologue_ns(2010);
  t->set_recorder_append_ns(2011);
  return Packet(p);
}

TraceBuilder& TraceBuilder::Packet(const format::Packet& packet) {
  bytes_ += Frame(packet);
  return *this;
}

TraceBuilder& TraceBuilder::Raw(const std::string& bytes) {
  bytes_ += bytes;
  return *this;
}

std::string TraceBuilder::Write(const std::string& name) const { return WriteTempFile(name, bytes_); }

format::Header TraceBuilder::RankHeader(int32_t rank, int32_t local_rank, int32_t world_size, int32_t pid,
                                        const std::string& hostname, const std::string& executable) {
  format::Header h = DefaultHeader();
  if (rank >= 0) h.set_rank(rank);
  if (local_rank >= 0) h.set_local_rank(local_rank);
  if (world_size >= 0) h.set_world_size(world_size);
  h.set_pid(pid);
  h.set_hostname(hostname);
  h.set_executable(executable);
  return h;
}

TraceBuilder& TraceBuilder::NamedModule(uint32_t id, const std::string& path) {
  return Module(id, path, ModuleBase(id), ModuleBase(id), ModuleBase(id) + 0x10000);
}

TraceBuilder& TraceBuilder::Stack(uint64_t first_id, const std::vector<uint64_t>& pcs_innermost_first,
                                  uint64_t* leaf) {
  std::vector<uint64_t> parents, pcs;
  for (size_t i = 0; i < pcs_innermost_first.size(); ++i) {
    parents.push_back(i == 0 ? 0 : first_id + i - 1);
    pcs.push_back(pcs_innermost_first[pcs_innermost_first.size() - 1 - i]);
  }
  *leaf = first_id + pcs_innermost_first.size() - 1;
  return StackNodes(first_id, parents, pcs);
}

TraceBuilder& TraceBuilder::AllocatorAttach(uint64_t after_seq, const std::string& config, bool at_first_segment,
                                            const std::string& library) {
  format::Packet p;
  format::AllocatorAttach* a = p.mutable_allocator_attach();
  a->set_after_seq(after_seq);
  a->set_time_ns(kStartNs);
  a->set_library(library);
  a->set_devices(1);
  a->set_config(config);
  a->set_at_first_segment(at_first_segment);
  return Packet(p);
}

TraceBuilder& TraceBuilder::MemorySample(int32_t device, uint64_t free_bytes, uint64_t total_bytes,
                                         uint64_t after_seq, int64_t time_ns) {
  format::Packet p;
  format::MemorySample* m = p.mutable_memory_sample();
  m->set_time_ns(time_ns);
  m->set_device(device);
  m->set_free_bytes(free_bytes);
  m->set_total_bytes(total_bytes);
  m->set_after_seq(after_seq);
  return Packet(p);
}

}  // namespace cumemtrace::analyzer::test
