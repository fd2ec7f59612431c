// What every full pass over a trace keeps besides its events: the header, devices, threads, notices and trailer
// (TraceInfo) and the tables that name stacks (stack nodes, modules, strings, symbols, Python frames). A pass derives
// from it, hands it where those go, and overrides OnEvent and whatever else it needs.
#ifndef CUMEMTRACE_ANALYZER_MODEL_METADATA_VISITOR_H_
#define CUMEMTRACE_ANALYZER_MODEL_METADATA_VISITOR_H_

#include <cstdint>
#include <string>

#include "analyzer/model/stacks/python_frame_table.h"
#include "analyzer/model/stacks/stack_table.h"
#include "analyzer/model/stacks/symbol_table.h"
#include "analyzer/model/trace_info.h"
#include "analyzer/reader/trace_reader.h"

namespace cumemtrace::analyzer {

class MetadataVisitor : public TraceVisitor {
 public:
  MetadataVisitor(TraceInfo& info, StackTable& stacks, SymbolTable& symbols, PythonFrameTable& python_frames)
      : info_(info), stacks_(stacks), symbols_(symbols), python_frames_(python_frames) {}

  void OnHeader(const TraceHeader& header) override { info_.header = header; }
  void OnDevice(const DeviceInfo& device) override { info_.devices[device.ordinal] = device; }
  void OnThread(const ThreadInfo& thread) override { info_.threads[thread.index] = thread; }
  void OnModule(const ModuleInfo& module) override { symbols_.AddModule(module); }
  void OnStackNode(const StackNode& node) override { stacks_.Add(node); }
  void OnString(uint32_t id, const std::string& value) override { symbols_.AddString(id, value); }
  void OnSymbol(const SymbolInfo& symbol) override { symbols_.AddSymbol(symbol); }
  void OnPythonFrame(const PythonFrameInfo& frame) override { python_frames_.Add(frame); }
  void OnNotice(const NoticeInfo& notice) override { info_.notices.push_back(notice); }
  void OnGpuProcesses(const GpuProcessesInfo& list) override { info_.AddGpuProcesses(list); }
  void OnTrailer(const TrailerInfo& trailer) override {
    info_.has_trailer = true;
    info_.trailer = trailer;
  }

 private:
  TraceInfo& info_;
  StackTable& stacks_;
  SymbolTable& symbols_;
  PythonFrameTable& python_frames_;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_METADATA_VISITOR_H_
