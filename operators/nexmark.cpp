#include "operators/nexmark.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <string_view>

#include "operators/splitmix.hpp"

namespace streamctl::operators {

namespace {

using state::Value;

// Beam's NexmarkConfiguration defaults. A bid or auction refers to a hot item with probability
// 1 - 1/ratio; hot items are the first (sellers, auctions) or second (bidders) of the newest
// block of kHotBlock ids.
constexpr std::uint64_t kHotAuctionRatio = 2;
constexpr std::uint64_t kHotSellerRatio = 4;
constexpr std::uint64_t kHotBidderRatio = 4;
constexpr std::uint64_t kHotBlock = 100;
constexpr std::uint64_t kActivePeople = 1000;
constexpr std::uint64_t kInFlightAuctions = 100;
// Events until kInFlightAuctions more auctions exist (100 * 50 / 3): an auction lasts on
// average that long, as Beam's nextAuctionLengthMs.
constexpr std::uint64_t kAuctionHorizonEvents = kInFlightAuctions * 50 / 3;

// Flink Nexmark's bid channels: half the bids come from 4 hot channels, the rest from 10000.
constexpr std::uint64_t kHotChannelRatio = 2;
constexpr std::uint64_t kChannels = 10000;
constexpr std::array<std::string_view, 4> kHotChannels{"Google", "Facebook", "Baidu", "Apple"};

constexpr std::array<std::string_view, 11> kFirstNames{
    "Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"};
constexpr std::array<std::string_view, 9> kLastNames{
    "Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"};
constexpr std::array<std::string_view, 10> kCities{
    "Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland",
    "Bend",    "Redmond",     "Seattle",       "Kent",  "Cheyenne"};
constexpr std::array<std::string_view, 6> kStates{"AZ", "CA", "ID", "OR", "WA", "WY"};

// The most fields of an event (an auction's).
constexpr std::uint32_t kMostFields = 10;

// Salts, so that the streams of different uses of one number do not coincide.
constexpr std::uint64_t kEventSalt = 0x6e65786d61726b31ULL;   // "nexmark1"
constexpr std::uint64_t kChannelSalt = 0x6368616e6e656c31ULL; // "channel1"

// A splitmix64 stream: the pseudo-random draws of one event.
class Rng {
public:
  explicit Rng(std::uint64_t state) : state_(state) {}

  std::uint64_t next() {
    std::uint64_t r = splitmix64(state_);
    state_ += kSplitmixGamma;
    return r;
  }

  // Uniform in [0, bound), bound > 0: a multiply-shift for 32-bit bounds (Lemire, bias below
  // bound / 2^32), a modulo above.
  std::uint64_t below(std::uint64_t bound) {
    std::uint64_t x = next();
    return bound <= (1ULL << 32) ? ((x >> 32) * bound) >> 32 : x % bound;
  }

  bool one_in(std::uint64_t ratio) { return below(ratio) == 0; }

  // Advances the stream past `draws` draws, as if they were made (a field nobody reads is not
  // written, but the fields after it must get the same draws).
  void skip(std::uint64_t draws) { state_ += draws * kSplitmixGamma; }

private:
  std::uint64_t state_;
};

// 10^(k/256) for k in 0..256, by repeated multiplication at compile time, so that prices are
// the same on every machine (std::pow may differ in the last bit between C libraries).
constexpr std::array<double, 257> make_decade_table() {
  std::array<double, 257> t{};
  double x = 1.0;
  for (std::size_t k = 0; k < t.size(); ++k) {
    t[k] = x;
    x *= 1.0090350448414473; // 10^(1/256)
  }
  return t;
}
constexpr std::array<double, 257> kDecade = make_decade_table();
constexpr std::array<double, 6> kPowersOfTen{1, 10, 100, 1000, 10000, 100000};

// A price in cents, log-uniform from 100 to 10^8 as Beam's round(10^(6u) * 100): a table of
// 10^(k/256), linearly interpolated with 16 bits of fraction.
std::int64_t next_price(Rng& rng) {
  std::uint64_t x = rng.below(6 * 256 * 65536);
  std::uint64_t step = x >> 16;
  double frac = static_cast<double>(x & 0xffff) / 65536.0;
  std::size_t k = step % 256;
  double mantissa = kDecade[k] + (kDecade[k + 1] - kDecade[k]) * frac;
  return static_cast<std::int64_t>(mantissa * 100.0 * kPowersOfTen[step / 256] + 0.5);
}

// The text of one record, built in place and then copied into the batch's arena at once.
class Text {
public:
  struct Span {
    std::uint32_t at = 0, size = 0;
  };

  std::uint32_t mark() const { return size_; }
  Span since(std::uint32_t mark) const { return Span{mark, size_ - mark}; }

  void put(char c) { buf_[size_++] = c; }
  void put(std::string_view s) {
    std::copy(s.begin(), s.end(), buf_.begin() + size_);
    size_ += static_cast<std::uint32_t>(s.size());
  }
  void put_number(std::uint64_t v) {
    auto [end, ec] = std::to_chars(buf_.data() + size_, buf_.data() + buf_.size(), v);
    size_ = static_cast<std::uint32_t>(end - buf_.data());
  }
  void put_digits4(std::uint64_t v) {
    for (int k = 3; k >= 0; --k) {
      buf_[size_ + static_cast<std::uint32_t>(k)] = static_cast<char>('0' + v % 10);
      v /= 10;
    }
    size_ += 4;
  }
  Span add(std::string_view s) {
    std::uint32_t m = mark();
    put(s);
    return since(m);
  }

  // Letters, and with `spaces` a space for about one character in 13 (never first or last),
  // `length` in all: Beam's nextString.
  Span add_words(Rng& rng, std::uint64_t length, bool spaces, char space = ' ') {
    std::uint32_t m = mark();
    for (std::uint64_t k = 0; k < length; ++k) {
      std::uint64_t x = rng.next();
      bool blank = spaces && k > 0 && k + 1 < length && (((x & 0xffffffffULL) * 13) >> 32) == 0;
      put(blank ? space : static_cast<char>('a' + (((x >> 32) * 26) >> 32)));
    }
    return since(m);
  }

  // add_words's draws without its text: for a field nobody reads.
  static Span skip_words(Rng& rng, std::uint64_t length) {
    rng.skip(length);
    return {};
  }

  std::string_view view() const { return std::string_view(buf_.data(), size_); }

  // Copies the text into `out`'s arena; values() then point into the copy.
  void store(state::Batch& out) { stored_ = out.copy_string(std::string_view(buf_.data(), size_)); }
  // Letters, digits, spaces and the punctuation of this file's texts: nothing JSON escapes.
  Value value(Span s) const { return Value::plain_string(stored_.substr(s.at, s.size)); }

private:
  // The longest record text is an auction's: 7 + 19 + 99 bytes.
  std::array<char, 256> buf_;
  std::uint32_t size_ = 0;
  std::string_view stored_;
};

// "https://www.nexmark.com/abc/de_f/ghi/item.htm?query=1": three path segments of 3 or 4
// characters, a pure function of `key` (Flink draws them once per process).
void add_base_url(Text& text, std::uint64_t key) {
  Rng rng(splitmix64(key ^ kChannelSalt));
  text.put("https://www.nexmark.com/");
  for (int k = 0; k < 3; ++k) {
    text.add_words(rng, 3 + rng.below(2), true, '_');
    text.put('/');
  }
  text.put("item.htm?query=1");
}

std::uint32_t reverse_bits(std::uint32_t x) {
  std::uint32_t r = 0;
  for (int k = 0; k < 32; ++k, x >>= 1)
    r = (r << 1) | (x & 1);
  return r;
}

// A person made at or before the event whose newest person is `last` (base 0): the hot one
// with probability 1 - 1/hot_ratio, else one of the newest kActivePeople.
std::uint64_t pick_person(Rng& rng, std::uint64_t last, std::uint64_t hot_ratio,
                          std::uint64_t hot) {
  if (!rng.one_in(hot_ratio)) return hot;
  std::uint64_t people = last + 1;
  std::uint64_t active = std::min(people, kActivePeople);
  return people - active + rng.below(active);
}

void make_person(std::uint64_t n, Rng& rng, std::int64_t ts, const NexmarkFields& f,
                 state::InPlaceRecord& b, state::Batch& out) {
  Text text;
  auto type = text.add("person");
  std::uint32_t m = text.mark();
  text.put(kFirstNames[rng.below(kFirstNames.size())]);
  text.put(' ');
  text.put(kLastNames[rng.below(kLastNames.size())]);
  auto name = text.since(m);
  Text::Span email;
  if (f.wants(f.email_address)) {
    m = text.mark();
    text.add_words(rng, 3 + rng.below(4), false);
    text.put('@');
    text.add_words(rng, 3 + rng.below(2), false);
    text.put(".com");
    email = text.since(m);
  } else {
    Text::skip_words(rng, 3 + rng.below(4));
    Text::skip_words(rng, 3 + rng.below(2));
  }
  m = text.mark();
  for (int k = 0; k < 4; ++k) {
    if (k > 0) text.put(' ');
    text.put_digits4(rng.below(10000));
  }
  auto card = text.since(m);
  auto city = text.add(kCities[rng.below(kCities.size())]);
  auto us_state = text.add(kStates[rng.below(kStates.size())]);
  text.store(out);

  if (f.wants(f.event_type)) b.append(f.event_type, text.value(type));
  if (f.wants(f.id)) b.append(f.id, Value::integer(nexmark_last_person_id(n)));
  if (f.wants(f.name)) b.append(f.name, text.value(name));
  if (f.wants(f.email_address)) b.append(f.email_address, text.value(email));
  if (f.wants(f.credit_card)) b.append(f.credit_card, text.value(card));
  if (f.wants(f.city)) b.append(f.city, text.value(city));
  if (f.wants(f.state)) b.append(f.state, text.value(us_state));
  if (f.wants(f.date_time)) b.append(f.date_time, Value::integer(ts));
}

void make_auction(std::uint64_t n, Rng& rng, std::int64_t ts, std::int64_t interval_ms,
                  const NexmarkFields& f, state::InPlaceRecord& b, state::Batch& out) {
  auto last_person = static_cast<std::uint64_t>(nexmark_last_person_id(n) - kNexmarkFirstPersonId);
  std::uint64_t hot_seller = last_person / kHotBlock * kHotBlock;
  std::uint64_t seller = pick_person(rng, last_person, kHotSellerRatio, hot_seller);
  auto category = kNexmarkFirstCategory + static_cast<std::int64_t>(rng.below(kNexmarkCategories));
  std::int64_t initial_bid = next_price(rng);
  auto horizon_ms = static_cast<std::uint64_t>(interval_ms) * kAuctionHorizonEvents;
  auto expires =
      ts + 1 + static_cast<std::int64_t>(rng.below(std::max<std::uint64_t>(2 * horizon_ms, 1)));
  Text text;
  auto type = text.add("auction");
  auto item_name = f.wants(f.item_name) ? text.add_words(rng, 3 + rng.below(17), true)
                                        : Text::skip_words(rng, 3 + rng.below(17));
  auto description = f.wants(f.description) ? text.add_words(rng, 3 + rng.below(97), true)
                                            : Text::skip_words(rng, 3 + rng.below(97));
  std::int64_t reserve = initial_bid + next_price(rng);
  text.store(out);

  if (f.wants(f.event_type)) b.append(f.event_type, text.value(type));
  if (f.wants(f.id)) b.append(f.id, Value::integer(nexmark_last_auction_id(n)));
  if (f.wants(f.item_name)) b.append(f.item_name, text.value(item_name));
  if (f.wants(f.description)) b.append(f.description, text.value(description));
  if (f.wants(f.initial_bid)) b.append(f.initial_bid, Value::integer(initial_bid));
  if (f.wants(f.reserve)) b.append(f.reserve, Value::integer(reserve));
  if (f.wants(f.date_time)) b.append(f.date_time, Value::integer(ts));
  if (f.wants(f.expires)) b.append(f.expires, Value::integer(expires));
  if (f.wants(f.seller)) b.append(f.seller, Value::integer(kNexmarkFirstPersonId + static_cast<std::int64_t>(seller)));
  if (f.wants(f.category)) b.append(f.category, Value::integer(category));
}

void make_bid(std::uint64_t n, Rng& rng, std::int64_t ts, const NexmarkFields& f,
              const NexmarkChannels& channels, state::InPlaceRecord& b) {
  auto last_auction =
      static_cast<std::uint64_t>(nexmark_last_auction_id(n) - kNexmarkFirstAuctionId);
  std::uint64_t auction = last_auction / kHotBlock * kHotBlock;
  if (rng.one_in(kHotAuctionRatio)) {
    std::uint64_t first = last_auction > kInFlightAuctions ? last_auction - kInFlightAuctions : 0;
    auction = first + rng.below(last_auction - first + 1);
  }
  auto last_person = static_cast<std::uint64_t>(nexmark_last_person_id(n) - kNexmarkFirstPersonId);
  // Beam's hot bidder is the second person of the newest block, which does not exist yet
  // while that block has one person; then the previous block's second person is used.
  std::uint64_t hot_bidder = last_person == 0 ? 0 : (last_person - 1) / kHotBlock * kHotBlock + 1;
  std::uint64_t bidder = pick_person(rng, last_person, kHotBidderRatio, hot_bidder);
  std::int64_t price = next_price(rng);

  // Half of the bids come from one of the 4 hot channels (keys kChannels and up).
  const bool hot = !rng.one_in(kHotChannelRatio);
  const std::uint64_t channel =
      hot ? kChannels + rng.below(kHotChannels.size()) : rng.below(kChannels);

  if (f.wants(f.event_type)) b.append(f.event_type, Value::plain_string("bid"));
  if (f.wants(f.auction)) b.append(f.auction, Value::integer(kNexmarkFirstAuctionId + static_cast<std::int64_t>(auction)));
  if (f.wants(f.bidder)) b.append(f.bidder, Value::integer(kNexmarkFirstPersonId + static_cast<std::int64_t>(bidder)));
  if (f.wants(f.price)) b.append(f.price, Value::integer(price));
  if (f.wants(f.channel)) b.append(f.channel, Value::plain_string(channels.name(channel)));
  if (f.wants(f.url)) b.append(f.url, Value::plain_string(channels.url(channel)));
  if (f.wants(f.date_time)) b.append(f.date_time, Value::integer(ts));
}

} // namespace

NexmarkFields::NexmarkFields(state::FieldNames& names)
    : event_type(names.intern("event_type")), id(names.intern("id")), name(names.intern("name")),
      email_address(names.intern("email_address")), credit_card(names.intern("credit_card")),
      city(names.intern("city")), state(names.intern("state")),
      date_time(names.intern("date_time")), item_name(names.intern("item_name")),
      description(names.intern("description")), initial_bid(names.intern("initial_bid")),
      reserve(names.intern("reserve")), expires(names.intern("expires")),
      seller(names.intern("seller")), category(names.intern("category")),
      auction(names.intern("auction")), bidder(names.intern("bidder")),
      price(names.intern("price")), channel(names.intern("channel")), url(names.intern("url")) {}

NexmarkChannels::NexmarkChannels() {
  const std::uint64_t keys = kChannels + kHotChannels.size();
  names_.resize(keys);
  urls_.resize(keys);
  text_.reserve(keys * 100); // names of up to 12 bytes, URLs of up to 88
  auto keep = [this](std::string_view made) {
    Span s{static_cast<std::uint32_t>(text_.size()), static_cast<std::uint32_t>(made.size())};
    text_.append(made);
    return s;
  };
  for (std::uint64_t key = 0; key < keys; ++key) {
    Text text; // the longest URL is about 90 bytes
    if (key < kChannels) {
      text.put("channel-");
      text.put_number(key);
    } else {
      text.put(kHotChannels[key - kChannels]);
    }
    names_[key] = keep(text.view());
    text = Text();
    add_base_url(text, key);
    // As Flink's: nine channels in ten carry their id, bit-reversed, in the URL (not the hot
    // channels).
    if (key < kChannels && splitmix64(key ^ kChannelSalt ^ 1) % 10 > 0) {
      text.put("&channel_id=");
      auto reversed = static_cast<std::int32_t>(reverse_bits(static_cast<std::uint32_t>(key)));
      text.put_number(static_cast<std::uint64_t>(std::abs(static_cast<std::int64_t>(reversed))));
    }
    urls_[key] = keep(text.view());
  }
}

void NexmarkStream::make(std::uint64_t n, state::Batch& out) {
  Rng rng(splitmix64(splitmix64(seed_ ^ kEventSalt) + n));
  std::int64_t ts = clock_.start_time + static_cast<std::int64_t>(n) * clock_.interval_ms;
  state::InPlaceRecord record(out, kMostFields);
  switch (nexmark_kind(n)) {
  case NexmarkKind::Person: make_person(n, rng, ts, fields_, record, out); break;
  case NexmarkKind::Auction:
    make_auction(n, rng, ts, clock_.interval_ms, fields_, record, out);
    break;
  case NexmarkKind::Bid:
    if (!channels_) kept_channels_ = channels_ = std::make_shared<const NexmarkChannels>();
    make_bid(n, rng, ts, fields_, *channels_, record);
    out.retain(kept_channels_);
    break;
  }
  record.finish();
}

} // namespace streamctl::operators
