#include "operators/line_source.hpp"

namespace streamctl::operators {

LineSource::LineSource(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                       state::FieldNames& names)
    : decoder_(spec, node, names) {}

SourceStatus LineSource::poll(state::Batch& out, std::size_t max_records) {
  if (done_) return SourceStatus::End;
  std::size_t produced = 0;
  const void* retained_chunk = nullptr; // records point into the lines: keep their chunk alive
  while (produced < max_records) {
    if (!reader_) {
      fd_ = open_next_input();
      if (fd_ < 0) {
        done_ = true;
        return produced > 0 ? SourceStatus::Data : SourceStatus::End;
      }
      reader_.emplace(fd_);
    }
    auto line = reader_->next_line();
    if (!line) {
      if (reader_->at_end()) {
        close_input(fd_);
        reader_.reset();
        fd_ = -1;
        continue;
      }
      auto fill = reader_->fill(blocking_reads());
      if (fill == LineReader::Fill::WouldBlock)
        return produced > 0 ? SourceStatus::Data : SourceStatus::Idle;
      continue;
    }
    if (line->empty()) continue; // blank lines carry no record
    if (reader_->chunk().get() != retained_chunk) {
      out.retain(reader_->chunk());
      retained_chunk = reader_->chunk().get();
    }
    std::size_t before = out.size();
    auto decoded = decoder_.decode(*line, out);
    if (!decoded) ctx_.errors->bad_record(*line, reader_->line_number(), decoded.error());
    produced += out.size() - before;
  }
  return SourceStatus::Data;
}

} // namespace streamctl::operators
