#include "operators/line_source.hpp"

namespace streamctl::operators {

LineSource::LineSource(const pipeline::PipelineSpec& spec, const pipeline::NodeSpec& node,
                       state::FieldNames& names)
    : spec_(spec), node_(node), names_(names), decoder_(std::in_place, spec, node, names) {}

std::optional<LineProgress> LineSource::current_progress() const {
  if (!reader_) return std::nullopt;
  return LineProgress{reader_->offset(), reader_->line_number(), header_};
}

SourceStatus LineSource::poll(state::Batch& out, std::size_t max_records) {
  origins_.clear();
  if (done_) return SourceStatus::End;
  std::size_t produced = 0;
  const void* retained_chunk = nullptr; // records point into the lines: keep their chunk alive
  while (produced < max_records) {
    if (!reader_) {
      auto input = open_next_input();
      if (!input) {
        if (inputs_may_follow()) return produced > 0 ? SourceStatus::Data : SourceStatus::Idle;
        done_ = true;
        return produced > 0 ? SourceStatus::Data : SourceStatus::End;
      }
      fd_ = input->fd;
      end_ = input->end;
      reader_.emplace(fd_, std::size_t{1} << 20, input->from.offset, input->from.line);
      if (holds_unterminated_line()) reader_->hold_unterminated_line();
      // A fresh decoder per input: its csv header is its own. A resumed input tells the
      // decoder the header it read before the checkpoint (it appends no record).
      if (!decoder_) decoder_.emplace(spec_, node_, names_);
      header_ = input->from.header;
      if (!header_.empty()) {
        state::Batch scratch;
        (void)decoder_->decode(header_, scratch);
      }
    }
    // A range ends once the next line starts at or after its end.
    const bool range_end = reader_->offset() >= end_;
    auto line = range_end ? std::nullopt : reader_->next_line();
    if (!line) {
      if (range_end || reader_->at_end()) {
        if (auto held = reader_->held_bytes(); held > 0 && !range_end) unterminated_line_held(held, reader_->line_number() + 1);
        close_input(fd_, LineProgress{reader_->offset(), reader_->line_number(), header_});
        reader_.reset();
        decoder_.reset();
        header_.clear();
        fd_ = -1;
        continue;
      }
      reader_->set_growing(input_may_grow());
      auto fill = reader_->fill(blocking_reads());
      if (fill == LineReader::Fill::WouldBlock)
        return produced > 0 ? SourceStatus::Data : SourceStatus::Idle;
      continue;
    }
    if (line->empty()) continue; // blank lines carry no record
    if (reader_->chunk_address() != retained_chunk) {
      out.retain(reader_->chunk());
      retained_chunk = reader_->chunk_address();
    }
    std::size_t before = out.size();
    auto decoded = decoder_->decode(*line, out);
    for (std::size_t k = before; k < out.size(); ++k)
      origins_.push_back(RecordOrigin{*line, reader_->line_number()});
    if (!decoded) ctx_.errors->bad_record(*line, reader_->line_number(), decoded.error());
    // Only a csv header line decodes to no record: remember it for a resumed reader.
    else if (out.size() == before && header_.empty()) header_ = std::string(*line);
    produced += out.size() - before;
  }
  return SourceStatus::Data;
}

} // namespace streamctl::operators
