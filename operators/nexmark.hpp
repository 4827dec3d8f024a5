#pragma once
// The Nexmark benchmark's auction events (Tucker et al., "NEXMark - A Benchmark for Queries
// over Data Streams"), modelled on the generator of Apache Beam and of Flink's Nexmark: one
// stream of persons, auctions and bids, for `profile = "nexmark"` of the generator source.
//
// Event N is a pure function of (seed, N): the kind, the ids and the time follow from N alone,
// and the pseudo-random fields from a splitmix64 stream seeded with (seed, N). So any subtask
// can make any event, and the same seed gives the same stream on every machine (integer
// arithmetic and IEEE basic operations only; no libm).
//
// Kinds, ids and time (as Beam's GeneratorConfig, with its defaults):
//   - by N % 50: 0 is a person, 1..3 are auctions, 4..49 are bids (1 : 3 : 46);
//   - persons and auctions are numbered in stream order from 1000: the person of event N has
//     id 1000 + N / 50, the auctions ids 1000 + 3 * (N / 50) + (N % 50 - 1);
//   - date_time = start_time + N * interval (Beam spaces events by its inter-event delay).
// References (Beam's defaults: hot auction ratio 2, hot seller and hot bidder ratio 4, 1000
// active people, 100 auctions in flight):
//   - an auction's seller is, with probability 3/4, the "hot seller" (the first person of the
//     newest block of 100 ids), else uniform over the newest 1000 persons;
//   - a bid's auction is, with probability 1/2, the "hot auction" (the first auction of the
//     newest block of 100), else uniform over the newest 101 auctions;
//   - a bid's bidder is, with probability 3/4, the "hot bidder" (the second person of the newest
//     block of 100 that has one), else uniform over the newest 1000 persons.
// Unlike Beam, every reference is to a person or auction made at or before the event: Beam
// also picks up to 10 ids ahead of the newest (its "lead") and its hot bidder may not exist yet.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "state/batch.hpp"
#include "state/field_names.hpp"

namespace streamctl::operators {

enum class NexmarkKind : std::uint8_t { Person, Auction, Bid };

inline constexpr std::int64_t kNexmarkFirstPersonId = 1000;
inline constexpr std::int64_t kNexmarkFirstAuctionId = 1000;
inline constexpr std::int64_t kNexmarkFirstCategory = 10;
inline constexpr std::int64_t kNexmarkCategories = 10;

// The kind of event `n`.
constexpr NexmarkKind nexmark_kind(std::uint64_t n) {
  std::uint64_t offset = n % 50;
  return offset == 0 ? NexmarkKind::Person : offset <= 3 ? NexmarkKind::Auction : NexmarkKind::Bid;
}

// The id of the newest person made at or before event `n` (the person of `n`, if it is one).
constexpr std::int64_t nexmark_last_person_id(std::uint64_t n) {
  return kNexmarkFirstPersonId + static_cast<std::int64_t>(n / 50);
}

// The id of the newest auction made at or before event `n` (the auction of `n`, if it is one);
// kNexmarkFirstAuctionId - 1 for event 0, before any auction.
constexpr std::int64_t nexmark_last_auction_id(std::uint64_t n) {
  auto epoch = static_cast<std::int64_t>(n / 50);
  auto offset = static_cast<std::int64_t>(n % 50);
  std::int64_t base0 = offset == 0   ? 3 * epoch - 1
                       : offset <= 3 ? 3 * epoch + offset - 1
                                     : 3 * epoch + 2;
  return kNexmarkFirstAuctionId + base0;
}

// The interned names of every field an event may have, in Nexmark's snake_case.
struct NexmarkFields {
  explicit NexmarkFields(state::FieldNames& names);

  state::FieldId event_type;
  // person
  state::FieldId id, name, email_address, credit_card, city, state, date_time;
  // auction (also id and date_time)
  state::FieldId item_name, description, initial_bid, reserve, expires, seller, category;
  // bid (also date_time)
  state::FieldId auction, bidder, price, channel, url;

  // Every field id above, once.
  std::vector<state::FieldId> all() const {
    return {event_type, id,          name,    email_address, credit_card, city,   state,
            date_time,  item_name,   description, initial_bid, reserve,    expires, seller,
            category,   auction,     bidder,  price,         channel,     url};
  }

  // By FieldId, the fields to make (projection: what anything downstream reads); empty: all.
  // The others are not written, and the costly ones (words, URLs) not made, but every field
  // that is made has the same value as when all are.
  std::vector<std::uint8_t> wanted; // bytes, not bits: read for every field of every event
  bool wants(state::FieldId field) const {
    return wanted.empty() || (field < wanted.size() && wanted[field]);
  }
};

struct NexmarkClock {
  std::int64_t start_time = 0;  // date_time of event 0, epoch ms
  std::int64_t interval_ms = 1; // date_time step between consecutive events
};

// The channels of bids and their URLs, 10,004 of each (keys 0-9999 are "channel-K", 10000-10003
// the hot channels), made once per stream and shared by every batch that points into them:
// drawing a URL per bid, and copying it with the rest of the bid's text into the batch, was a
// quarter of Nexmark q0's CPU. About 1 MB.
class NexmarkChannels {
public:
  NexmarkChannels();
  std::string_view name(std::uint64_t key) const { return at(names_[key]); }
  std::string_view url(std::uint64_t key) const { return at(urls_[key]); }

private:
  struct Span {
    std::uint32_t at = 0, size = 0;
  };
  std::string_view at(Span s) const { return std::string_view(text_).substr(s.at, s.size); }

  std::string text_;
  std::vector<Span> names_, urls_; // by key
};

// The event stream of one seed.
class NexmarkStream {
public:
  NexmarkStream(std::uint64_t seed, NexmarkClock clock, NexmarkFields fields)
      : seed_(seed), clock_(clock), fields_(std::move(fields)) {}

  // Appends event `n` to `out` as one flat record:
  //   person:  event_type "person", id, name, email_address, credit_card, city, state, date_time
  //   auction: event_type "auction", id, item_name, description, initial_bid, reserve,
  //            date_time, expires, seller, category
  //   bid:     event_type "bid", auction, bidder, price, channel, url, date_time
  // Ids, prices (in cents) and times are ints; the rest strings, all stored in `out`'s arena
  // with one allocation per record, as are the fields (in place); a bid's channel and URL
  // point into this stream's channel table, which `out` then retains.
  void make(std::uint64_t n, state::Batch& out);

  const NexmarkFields& fields() const { return fields_; }

private:
  std::uint64_t seed_;
  NexmarkClock clock_;
  NexmarkFields fields_;
  // Made at the first bid: every process that loads the job makes its sources, most never
  // to run them, and the table takes milliseconds.
  std::shared_ptr<const NexmarkChannels> channels_;
  std::shared_ptr<const void> kept_channels_; // channels_, as batches retain it
};

} // namespace streamctl::operators
