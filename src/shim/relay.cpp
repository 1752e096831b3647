#include "shim/relay.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "contain/layers.hpp"
#include "sys/json_string.hpp"
#include "sys/text.hpp"

namespace warden::shim {

std::string_view to_string(ClientLoss c) {
    switch (c) {
        case ClientLoss::none:
            return "none";
        case ClientLoss::stdin_eof:
            return "stdin_eof";
        case ClientLoss::stdout_closed:
            return "epipe";
        case ClientLoss::client_exit:
            return "client_exit";
        case ClientLoss::signal:
            return "signal";
    }
    return "?";
}

std::string_view to_string(StdoutGuard g) {
    switch (g) {
        case StdoutGuard::Divert:
            return "divert";
        case StdoutGuard::Pass:
            return "pass";
        case StdoutGuard::Fail:
            return "fail";
    }
    return "?";
}

// ---- CountingSink -----------------------------------------------------------------------

Result<int64_t> CountingSink::on_request(const rpc::Message&, std::string_view) {
    return static_cast<int64_t>(++requests);
}

void CountingSink::on_response(const Answer& a, const Outstanding* req) {
    ++responses;
    if (req) ++matched;
    if (a.outcome == rpc::Outcome::rpc_error) ++errors;
    if (a.outcome == rpc::Outcome::tool_error) ++tool_errors;
}

void CountingSink::on_client_lost(ClientLoss cause, std::span<const Outstanding> outstanding) {
    lost = cause;
    abandoned += outstanding.size();
    for (auto& o : outstanding)
        abandoned_ids.push_back(o.raw);
}

// ---- Streams and sinks ------------------------------------------------------------------

namespace {

// The JSON-RPC error code of a refusal ("server error", the range left to implementations).
constexpr int64_t kRefusedCode = -32000;

// epoll data: the high half says whose fd it is.
constexpr uint64_t kInternal = 0, kWatched = 1;
uint64_t tag(uint64_t kind, uint32_t token) {
    return (kind << 32) | token;
}

enum : uint32_t { kClientIn = 1, kServerOut, kServerErr, kServerIn, kClientOut, kLog };

// Non-blocking only where it is ours alone to change: pipes and sockets. A terminal or a
// file shared with the client keeps its mode (setting O_NONBLOCK on a shared open file
// description would change it for the client too).
void make_nonblocking_if_private(int fd) {
    struct stat st;
    if (::fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
        (void)set_nonblocking(fd, true);
}

// {"jsonrpc":"2.0","id":ID,"error":{"code":-32000,"message":MESSAGE}}: the relay's own
// answers (a refusal, a failed wake).
void append_error_answer(std::string& out, std::string_view id_raw, std::string_view message) {
    out += R"({"jsonrpc":"2.0","id":)";
    out.append(id_raw);
    out += R"(,"error":{"code":)";
    out += std::to_string(kRefusedCode);
    out += R"(,"message":)";
    append_json_string(out, message);
    out += "}}";
}

bool starts_like_json(std::string_view s) {
    size_t i = s.find_first_not_of(" \t\r\n");
    return i != std::string_view::npos && (s[i] == '{' || s[i] == '[');
}

}  // namespace

// A destination: an fd and a queue for what it could not take yet.
//
// Lent bytes: a run of forwarded lines is a view into its stream's framer buffer. What the fd
// does not take at once is not copied when it is at least the high-water mark: the sink keeps
// the view (`lent`) and the stream reads nothing until the sink has written it (wants_input),
// so the framer's buffer stays put. (A smaller rest is copied: the queue then holds less than
// twice the high-water mark, and the stream reads on up to it, as before.) A
// long line is then resident once, in the framer, however slowly its reader reads; a copy into
// the queue would hold it twice (rpc/framer.hpp bounds the framer by --max-message). Bytes put
// while a loan is out (the rest of the same read, a refusal the relay writes itself) queue
// behind it in `after`. The order on the fd is q, then lent, then after.
struct Relay::Sink {
    int fd = -1;
    Fd owned;
    uint32_t token = 0;
    bool pollable = true;
    bool registered = false;
    bool want_out = false;
    bool closed = false;  // EPIPE / EPOLLERR, or closed by us: further bytes are dropped
    bool close_when_drained = false;  // close_server_input() waits for the queue to empty
    bool held = false;    // hibernation: queue everything, write nothing (detach_server)
    bool reclaim = true;  // false: q keeps its written front until it empties (a test fault)
    std::string q;
    size_t head = 0;
    std::string_view lent;  // see above
    std::string after;
    size_t peak = 0, quiet_drains = 0;  // when to give a grown queue back (flush)
    // Monotonic byte counts: handed to put(), and taken by write(). A byte at offset o (in
    // accepted order) has reached the reader's pipe once written > o.
    uint64_t accepted = 0, written = 0;

    size_t queued() const { return q.size() - head + lent.size() + after.size(); }
    bool lending() const { return !lent.empty(); }

    // Writes what it can now; false when the reader is gone.
    bool write_some(const char* p, size_t n, size_t& done) {
        done = 0;
        while (done < n) {
            ssize_t r = ::write(fd, p + done, n - done);
            if (r > 0) {
                done += static_cast<size_t>(r);
                written += static_cast<uint64_t>(r);
                continue;
            }
            if (r < 0 && errno == EINTR) continue;
            if (r < 0 && errno == EAGAIN) return true;
            return false;  // EPIPE and friends
        }
        return true;
    }

    // Forwards bytes in order: straight to the fd when nothing is queued (no copy), the
    // remainder into the queue, or lent (see above) when it is at least `lend_from` bytes:
    // a small remainder is cheaper copied, and lets the stream read on up to the high-water
    // mark. False when the reader is gone.
    bool put(std::string_view bytes, size_t lend_from = SIZE_MAX) {
        accepted += bytes.size();
        if (closed) return true;
        if (lending()) {
            after.append(bytes);
            return true;
        }
        if (held) {
            q.append(bytes);
            return true;
        }
        if (queued() == 0) {
            size_t w = 0;
            if (!write_some(bytes.data(), bytes.size(), w)) return fail();
            bytes.remove_prefix(w);
            if (bytes.empty()) return true;
            q.clear();
            head = 0;
        }
        if (bytes.size() >= lend_from) {
            lent = bytes;
            return true;
        }
        // q's front, up to head, is written: dead bytes. flush() drops them when q empties,
        // but a reader that keeps up almost, never quite (a client reading a flood of short
        // lines as they come), never lets it empty: appended behind a front never reclaimed,
        // q grew by every byte it ever queued. So the front goes before q would have to grow:
        // a move of what is queued (less than twice the high-water mark), once per
        // capacity's worth of bytes written.
        if (reclaim && head > 0 && q.size() + bytes.size() > q.capacity()) {
            q.erase(0, head);
            head = 0;
        }
        q.append(bytes);
        peak = std::max(peak, q.size());
        return true;
    }

    bool flush() {
        if (closed || held || queued() == 0) return true;
        size_t w = 0;
        bool ok = write_some(q.data() + head, q.size() - head, w);
        head += w;
        if (ok && head == q.size() && lending()) {
            ok = write_some(lent.data(), lent.size(), w);
            lent.remove_prefix(w);
            if (ok && !lending()) {
                // The loan is back: what queued behind it is next.
                q.swap(after);
                after.clear();
                head = 0;
                peak = std::max(peak, q.size());
                ok = write_some(q.data(), q.size(), w);
                head = w;
            }
        }
        if (head == q.size()) {
            // A large burst has gone out: give the memory back, but only once 16 drains in a
            // row needed less than a quarter of it. A server that reads large requests slowly
            // queues each one; shrinking after every drain would cost a fresh allocation
            // (and its page faults) and a copy per message.
            if (q.capacity() > (size_t{1} << 20)) {
                quiet_drains = peak * 4 < q.capacity() ? quiet_drains + 1 : 0;
                if (quiet_drains >= 16) {
                    quiet_drains = 0;
                    q = std::string();
                }
            }
            if (!lending()) peak = 0;
            q.clear();
            head = 0;
        }
        return ok ? true : fail();
    }

    void drop() {
        q.clear();
        head = 0;
        lent = {};
        after.clear();
    }

    bool fail() {
        closed = true;
        drop();
        q.shrink_to_fit();
        after.shrink_to_fit();
        return false;
    }
};

// A source: an fd, its framer, and the sink its bytes go to.
struct Relay::Stream {
    int fd = -1;
    Fd owned;
    uint32_t token = 0;
    Direction dir = Direction::client_to_server;
    bool framed = true;  // stderr is not framed
    bool pollable = true;
    bool registered = false;
    bool eof = false;  // EOF read, or we stopped reading for good
    Sink* out = nullptr;
    rpc::Framer framer;
    size_t oversize_bytes = 0;

    Stream(size_t max_message, size_t chunk, bool is_framed)
        : framed(is_framed), framer(max_message, is_framed ? chunk : 64) {}
};

// Reads one JSON object in pieces, never holding it, for what the journal wants of a response:
// the top-level "id" (its text as sent), "method", "result" or "error", error.code,
// result.isError and result.resultType (an input_required answer is not an ok one, however long).
// The relay needs it where the classifier cannot help: an oversize line, which is never held whole
// (rpc/framer.hpp), and the code of an error response, which the classifier does not keep. It is
// not a validator: it follows strings and nesting only, compares keys as written (no unescaping)
// and gives up on anything that does not start as an object (a batch, noise). Strings are skipped
// with one search each, so a long text costs little; a captured value longer than kMaxValue is not
// kept (such an id matches nothing).
struct Relay::Scan {
    static constexpr size_t kMaxValue = 256;
    enum class Key : uint8_t {
        other,
        id,
        method,
        params,
        result,
        error,
        code,
        is_error,
        result_type,
        tool
    };

    // Results.
    rpc::IdType id_type = rpc::IdType::none;
    std::string id;  // the id's JSON text, as rpc::Id::raw
    // A request's "method" and params.name, string contents as written (no unescaping); empty
    // until their value is complete (a client request read in pieces: rpc/framer.hpp).
    std::string method, tool;
    std::optional<int64_t> error_code;
    bool has_method = false, has_result = false, has_error = false, tool_error = false;
    bool input_required = false;  // result.resultType == "input_required" (2026-07-28)
    bool done = false;            // the object closed

    void reset() {
        id_type = rpc::IdType::none;
        id.clear();
        method.clear();
        tool.clear();
        error_code.reset();
        has_method = has_result = has_error = tool_error = input_required = done = false;
        dead_ = started_ = in_string_ = escape_ = after_string_ = value_overflow_ = false;
        depth_ = string_depth_ = capture_depth_ = 0;
        name_len_ = 0;
        top_ = capture_ = Key::other;
        value_.clear();
    }

    bool response() const {
        return done && !has_method && id_type != rpc::IdType::none && (has_result || has_error);
    }
    rpc::Outcome outcome() const {
        if (input_required && !Faults::from_env().oversize_outcome_unscanned)
            return rpc::Outcome::input_required;
        return has_error    ? rpc::Outcome::rpc_error
               : tool_error ? rpc::Outcome::tool_error
                            : rpc::Outcome::ok;
    }

    // What a whole line, scanned instead of parsed (relay.hpp, "Long lines"), is as far as a
    // scan can tell. Views point into this Scan.
    rpc::Message message(std::string_view content) const {
        rpc::Message m;
        m.json = starts_like_json(content);
        m.id = rpc::Id{id_type, id};
        if (done && has_method) {
            m.kind = id_type == rpc::IdType::none ? rpc::Kind::notification : rpc::Kind::request;
            m.method = method;
            m.tool = tool;
        } else if (done && (has_result || has_error)) {
            m.kind = rpc::Kind::response;
            m.outcome = outcome();
        } else {
            m.kind = rpc::Kind::invalid;
            m.reason = "a line longer than the parse limit that is not one JSON-RPC object";
        }
        return m;
    }

    void feed(std::string_view b) {
        size_t i = 0;
        while (i < b.size() && !dead_ && !done) {
            if (in_string_) {
                i = string_bytes(b, i);
                continue;
            }
            char c = b[i++];
            if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
            if (!started_) {
                started_ = true;
                dead_ = c != '{';
                depth_ = 1;
                continue;
            }
            bool string_before = after_string_;
            after_string_ = false;
            switch (c) {
                case '"':
                    in_string_ = true;
                    string_depth_ = depth_;
                    name_len_ = 0;
                    if (capture_ != Key::other) keep("\"");
                    break;
                case ':':
                    if (string_before && string_depth_ == depth_ && depth_ <= 2) member_starts();
                    break;
                case ',':
                    value_ends();
                    break;
                case '{':
                case '[':
                    if (capture_ != Key::other && depth_ == capture_depth_) capture_ = Key::other;
                    ++depth_;
                    break;
                case '}':
                case ']':
                    value_ends();
                    done = --depth_ == 0;
                    break;
                default:
                    if (capture_ != Key::other) keep(std::string_view(&c, 1));
            }
        }
    }

  private:
    // Inside a string from b[i]: up to and including its closing quote, or the end of b.
    size_t string_bytes(std::string_view b, size_t i) {
        if (escape_) {  // the byte after a backslash, maybe in the next piece
            escape_ = false;
            string_text(b.substr(i, 1));
            return i + 1;
        }
        size_t j = b.find_first_of("\"\\", i);
        size_t stop = j == std::string_view::npos ? b.size() : j;
        string_text(b.substr(i, stop - i));
        if (stop == b.size()) return stop;
        if (b[j] == '\\') {
            escape_ = true;
            string_text("\\");
            return j + 1;
        }
        in_string_ = false;
        after_string_ = true;
        if (capture_ != Key::other) keep("\"");
        return j + 1;
    }

    void string_text(std::string_view t) {
        if (capture_ != Key::other) keep(t);
        if (string_depth_ <= 2) {
            for (size_t k = 0; k < t.size() && name_len_ + k < sizeof name_; ++k)
                name_[name_len_ + k] = t[k];
            name_len_ += t.size();
        }
    }

    void keep(std::string_view t) {
        if (value_.size() + t.size() <= kMaxValue)
            value_.append(t);
        else
            value_overflow_ = true;
    }

    // A key and its colon at depth 1 or 2: which member this is, and whether to keep its value
    // (deeper members never matter).
    void member_starts() {
        std::string_view name(name_, std::min(name_len_, sizeof name_));
        if (name_len_ > sizeof name_) name = {};
        Key k = Key::other;
        if (depth_ == 1) {
            top_ = name == "id"       ? Key::id
                   : name == "method" ? Key::method
                   : name == "result" ? Key::result
                   : name == "error"  ? Key::error
                   : name == "params" ? Key::params
                                      : Key::other;
            has_method = has_method || top_ == Key::method;
            has_result = has_result || top_ == Key::result;
            has_error = has_error || top_ == Key::error;
            if (top_ == Key::id || top_ == Key::method) k = top_;
        } else if (depth_ == 2) {
            if (top_ == Key::error && name == "code") k = Key::code;
            if (top_ == Key::result && name == "isError") k = Key::is_error;
            if (top_ == Key::result && name == "resultType") k = Key::result_type;
            if (top_ == Key::params && name == "name") k = Key::tool;
        }
        capture_ = k;
        capture_depth_ = depth_;
        value_.clear();
        value_overflow_ = false;
    }

    // A `,` or a closing bracket at the current depth: a kept scalar value is complete.
    void value_ends() {
        if (capture_ == Key::other || depth_ != capture_depth_) return;
        Key k = capture_;
        capture_ = Key::other;
        if (value_overflow_ || value_.empty()) return;
        if (k == Key::id) {
            id = value_;
            id_type = value_[0] == '"'   ? rpc::IdType::string
                      : value_ == "null" ? rpc::IdType::null
                      : value_[0] == '-' || (value_[0] >= '0' && value_[0] <= '9')
                          ? rpc::IdType::number
                          : rpc::IdType::none;
        } else if (k == Key::code) {
            int64_t v = 0;
            auto [end, ec] = std::from_chars(value_.data(), value_.data() + value_.size(), v);
            if (ec == std::errc() && end == value_.data() + value_.size()) error_code = v;
        } else if (k == Key::is_error) {
            tool_error = value_ == "true";
        } else if (k == Key::result_type) {
            input_required = value_ == R"("input_required")";
        } else if ((k == Key::method || k == Key::tool) && value_.size() >= 2 &&
                   value_.front() == '"' && value_.back() == '"') {
            (k == Key::method ? method : tool).assign(value_, 1, value_.size() - 2);
        }
    }

    bool dead_ = false, started_ = false, in_string_ = false, escape_ = false;
    bool after_string_ = false, value_overflow_ = false;
    int depth_ = 0, string_depth_ = 0, capture_depth_ = 0;
    char name_[12] = {};  // the first bytes of the last string at depth 1 or 2 (a key?)
    size_t name_len_ = 0;
    Key top_ = Key::other;      // the depth-1 member being read
    Key capture_ = Key::other;  // whose scalar value value_ collects (other: none)
    std::string value_;
};

// ---- Relay ------------------------------------------------------------------------------

Relay::Relay(RelayOptions opts, Epoll ep, ActivitySink& sink)
    : opts_(opts),
      ep_(std::move(ep)),
      sink_(&sink),
      scan_(std::make_unique<Scan>()),
      client_scan_(std::make_unique<Scan>()) {}
Relay::Relay(Relay&&) noexcept = default;
Relay::~Relay() = default;

Result<Relay> Relay::create(RelayOptions opts, RelayFds fds, ActivitySink& sink) {
    // A reader that went away must come back as EPIPE, not kill us; a journal write past
    // RLIMIT_FSIZE must come back as EFBIG (deny/warn policy), not SIGXFSZ. Process-wide:
    // the spawner resets every disposition in the server, so neither leaks into it, and the
    // Session gives a library host its own back when it ends.
    ::signal(SIGPIPE, SIG_IGN);
    ::signal(SIGXFSZ, SIG_IGN);
    auto ep = Epoll::create();
    if (!ep) return ep.error();
    Relay r(opts, std::move(*ep), sink);
    if (auto s = r.setup(std::move(fds)); !s) return s.error();
    return r;
}

Status Relay::setup(RelayFds fds) {
    events_.resize(16);
    auto mk_sink = [&](int fd, Fd owned, uint32_t token) {
        auto s = std::make_unique<Sink>();
        s->reclaim = opts_.reclaim;
        s->owned = std::move(owned);
        s->fd = s->owned.valid() ? s->owned.get() : fd;
        s->token = token;
        if (s->owned.valid())
            (void)set_nonblocking(s->fd, true);
        else
            make_nonblocking_if_private(s->fd);
        return s;
    };
    auto mk_stream = [&](int fd, Fd owned, uint32_t token, Direction dir, bool framed, Sink* out) {
        return make_stream(fd, std::move(owned), token, dir, framed, out);
    };
    to_server_ = mk_sink(-1, std::move(fds.server_in), kServerIn);
    to_client_ = mk_sink(fds.client_out, Fd(), kClientOut);
    to_log_ = mk_sink(fds.log, Fd(), kLog);
    client_ = mk_stream(fds.client_in, Fd(), kClientIn, Direction::client_to_server, true,
                        to_server_.get());
    server_out_ = mk_stream(-1, std::move(fds.server_out), kServerOut, Direction::server_to_client,
                            true, to_client_.get());
    server_err_ = mk_stream(-1, std::move(fds.server_err), kServerErr, Direction::server_to_client,
                            false, to_log_.get());

    // Sinks stay registered (events 0 still reports EPOLLERR: the reader left); sources are
    // registered while they may be read (update_interest).
    for (Sink* s : {to_server_.get(), to_client_.get(), to_log_.get()}) {
        if (s->fd < 0) {
            s->closed = true;
            continue;
        }
        auto st = ep_.add(s->fd, 0, tag(kInternal, s->token));
        if (!st && st.error().code == EPERM)
            s->pollable = false;  // a regular file or /dev/null: always writable
        else if (!st)
            return st;
        else
            s->registered = true;
    }
    for (Stream* s : {client_.get(), server_out_.get(), server_err_.get()})
        if (auto st = register_stream(*s); !st) return st;
    return {};
}

std::unique_ptr<Relay::Stream> Relay::make_stream(int fd, Fd owned, uint32_t token, Direction dir,
                                                  bool framed, Sink* out) {
    auto s = std::make_unique<Stream>(opts_.max_message, opts_.read_chunk, framed);
    s->owned = std::move(owned);
    s->fd = s->owned.valid() ? s->owned.get() : fd;
    s->token = token;
    s->dir = dir;
    s->out = out;
    if (s->owned.valid())
        (void)set_nonblocking(s->fd, true);
    else
        make_nonblocking_if_private(s->fd);
    return s;
}

Status Relay::register_stream(Stream& s) {
    if (s.fd < 0) {
        s.eof = true;
        return {};
    }
    auto st = ep_.add(s.fd, EPOLLIN, tag(kInternal, s.token));
    if (!st && st.error().code == EPERM)
        s.pollable = false;  // a regular file or /dev/null: always readable
    else if (!st)
        return st;
    else
        s.registered = true;
    return {};
}

Status Relay::watch(int fd, uint32_t token) {
    auto s = ep_.add(fd, EPOLLIN, tag(kWatched, token));
    if (s) watched_.push_back(fd);
    return s;
}

Status Relay::unwatch(int fd) {
    watched_.erase(std::remove(watched_.begin(), watched_.end(), fd), watched_.end());
    return ep_.remove(fd);
}

size_t Relay::buffered() const {
    return to_server_->queued() + to_client_->queued() + to_log_->queued() +
           client_->framer.pending() + server_out_->framer.pending();
}

bool Relay::server_closed() const {
    return server_out_->eof && server_err_->eof &&
           (to_client_->closed || to_client_->queued() == 0) &&
           (to_log_->closed || to_log_->queued() == 0);
}

bool Relay::server_output_held_back() const {
    return !server_out_->eof && !server_out_->out->closed &&
           server_out_->out->queued() >= opts_.high_water;
}

// Diverted lines share our stderr: a stderr nobody reads must not grow without bound, but it
// must not stall the protocol either (divert() drops beyond the cap), so a stream's own sink
// alone decides.
bool Relay::wants_input(const Stream& s) const {
    if (s.eof) return false;
    if (s.out->closed) return true;      // reading and dropping keeps the writer unblocked
    if (s.out->lending()) return false;  // its framer's buffer is on loan (Sink)
    return s.out->queued() < opts_.high_water;
}

void Relay::update_interest() {
    if (to_server_->close_when_drained && (to_server_->closed || to_server_->queued() == 0))
        close_server_input();
    for (Stream* s : {client_.get(), server_out_.get(), server_err_.get()}) {
        if (!s->pollable || s->fd < 0) continue;
        bool want = wants_input(*s);
        if (want == s->registered) continue;
        if (want)
            s->registered = ep_.add(s->fd, EPOLLIN, tag(kInternal, s->token)).ok();
        else
            s->registered = !ep_.remove(s->fd).ok();
    }
    for (Sink* s : {to_server_.get(), to_client_.get(), to_log_.get()}) {
        if (!s->pollable || !s->registered) continue;
        bool want = !s->closed && !s->held && s->queued() > 0;
        if (want == s->want_out) continue;
        if (ep_.modify(s->fd, want ? uint32_t{EPOLLOUT} : 0u, tag(kInternal, s->token)).ok())
            s->want_out = want;
    }
}

void Relay::client_lost(ClientLoss cause) {
    if (loss_ != ClientLoss::none) return;
    loss_ = cause;
    loss_reported_ = true;  // the caller knows
    if (!client_->eof) {
        client_->eof = true;
        if (client_->registered) (void)ep_.remove(client_->fd);
        client_->registered = false;
    }
    // What the client already has is answered; the rest, being written or not, is abandoned.
    deliver_answers();
    sink_->on_client_lost(cause, outstanding());
    // Reported as abandoned: answers that still come are not matched to them, and those
    // still queued for the client will not be reported answered.
    n_outstanding_ = 0;
    pending_.clear();
    pending_head_ = 0;
}

void Relay::close_server_input() {
    Sink& s = *to_server_;
    if (s.held) {
        // Held for a server that was never woken (or never finished waking): not its to read.
        s.held = false;
        s.q.clear();
        s.head = 0;
    }
    if (s.owned.valid()) {
        (void)s.flush();
        // Bytes the client sent before it left are the server's: the EOF goes after them.
        // A server still reading gets them as it drains its pipe (update_interest() closes
        // once the queue is empty); one that never reads is ended by the teardown, and
        // the write fails.
        if (!s.closed && s.queued() > 0) {
            s.close_when_drained = true;
            return;
        }
        s.close_when_drained = false;
        if (s.registered) (void)ep_.remove(s.fd);
        s.registered = false;
        s.owned.reset();
        s.fd = -1;
    }
    s.closed = true;
    s.drop();
    // Client bytes still arriving have nowhere to go; keep reading them so the client never
    // blocks, and drop them (Sink::put on a closed sink).
}

void Relay::on_readable(Stream& s) {
    if (s.eof) return;
    if (s.framed && s.out->lending()) return;  // the framer's buffer must stay put
    if (!s.framed) {
        char buf[16384];
        ssize_t n = ::read(s.fd, buf, sizeof buf);
        if (n > 0) {
            if (gate_) last_activity_ = std::chrono::steady_clock::now();
            stats_.bytes_stderr += static_cast<size_t>(n);
            if (tap_) tap_->on_stderr(std::string_view(buf, static_cast<size_t>(n)));
            (void)s.out->put(std::string_view(buf, static_cast<size_t>(n)));
            return;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        s.eof = true;
    } else {
        auto space = s.framer.prepare();
        ssize_t n = ::read(s.fd, space.data(), space.size());
        if (n > 0) {
            if (gate_) last_activity_ = std::chrono::steady_clock::now();
            s.framer.commit(static_cast<size_t>(n));
            if (s.dir == Direction::client_to_server)
                stats_.bytes_client_to_server += static_cast<size_t>(n);
            else
                stats_.bytes_server_to_client += static_cast<size_t>(n);
            process_frames(s, false);
            return;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        // EOF (or a read error, which ends the stream the same way).
        s.eof = true;
        process_frames(s, true);
    }
    if (s.registered) (void)ep_.remove(s.fd);
    s.registered = false;
    if (&s == client_.get() && loss_ == ClientLoss::none) {
        client_lost(ClientLoss::stdin_eof);
        loss_reported_ = false;  // found here: poll() reports it
    }
}

void Relay::process_frames(Stream& s, bool eof) {
    // Consecutive forwarded frames are contiguous in the framer's buffer: send them as one
    // run, so a read of many lines costs one write.
    const char* run = nullptr;
    size_t run_len = 0;
    auto flush_run = [&] {
        if (run_len == 0) return;
        bool ok =
            s.out->put(std::string_view(run, run_len), opts_.lend ? opts_.high_water : SIZE_MAX);
        run_len = 0;
        if (s.out == to_client_.get()) wrote_to_client(ok);
    };
    for (;;) {
        auto f = eof ? s.framer.finish() : s.framer.next();
        if (!f) break;
        forward_ = true;
        // Where this frame will end in its sink's byte count if forwarded: the queued run goes
        // first (flushing the run moves it from run_len into `accepted`, so this holds).
        frame_end_ = s.out->accepted + run_len + f->bytes.size();
        if (s.dir == Direction::client_to_server)
            handle_client_frame(s, *f);
        else
            handle_server_frame(s, *f);
        if (!forward_) {
            flush_run();
            if (guard_failed_) break;
            continue;
        }
        if (run_len && run + run_len == f->bytes.data()) {
            run_len += f->bytes.size();
        } else {
            flush_run();
            run = f->bytes.data();
            run_len = f->bytes.size();
        }
        if (guard_failed_) break;
    }
    flush_run();
}

void Relay::handle_client_frame(Stream& s, const rpc::Frame& f) {
    using rpc::Kind;
    if (f.kind == rpc::Frame::Kind::oversize) {
        if (f.first) {
            ++stats_.oversize_client;
            s.oversize_bytes = 0;
            client_scan_->reset();
        }
        s.oversize_bytes += f.bytes.size();
        client_scan_->feed(f.bytes);
        if (f.first) oversize_request_starts(f.bytes);
        if (oversize_request_ == OversizeRequest::refused) forward_ = false;
        if (f.last) {
            sink_->on_oversize(Direction::client_to_server, s.oversize_bytes);
            oversize_request_ends();
        }
        return;
    }
    ++stats_.client_lines;
    if (f.kind == rpc::Frame::Kind::partial) ++stats_.partial_client;
    auto content = f.content();
    rpc::Message m = classify(*client_scan_, f);
    if (gate_ && m.kind != Kind::invalid && gate_->client_message(m, content)) {
        forward_ = false;
        return;
    }
    switch (m.kind) {
        case Kind::request: {
            ++stats_.requests;
            auto r = sink_->on_request(m, content);
            if (!r) {
                deny(m, r.error());
                forward_ = false;
                return;
            }
            track(m, *r);
            return;
        }
        case Kind::notification:
            ++stats_.notifications;
            sink_->on_notification(Direction::client_to_server, m);
            return;
        case Kind::response:
            ++stats_.client_responses;
            return;
        case Kind::invalid:
            ++stats_.invalid_client;
            sink_->on_invalid(Direction::client_to_server, content, m.reason);
            return;
        case Kind::batch: {
            // All or nothing: a batch is forwarded only if every request in it is recorded.
            // Each member is tracked under its own record as soon as it is recorded, so a
            // refusal at member k answers the members recorded before it (deny()) instead of
            // leaving them on record and in flight for ever.
            const size_t first = n_outstanding_;
            for (auto& member : *m.members) {
                if (member.kind == Kind::notification) ++stats_.notifications;
                if (member.kind != Kind::request) continue;
                ++stats_.requests;
                auto r = sink_->on_request(member, content);
                if (!r) {
                    deny(m, r.error(), first);
                    forward_ = false;
                    return;
                }
                track(member, *r);
            }
            return;
        }
    }
}

// The first piece of a client line longer than --max-message (rpc/framer.hpp), before any of
// its bytes is forwarded. What the bounded prefix shows decides: a response (result/error
// before any method), an MCP notification (a "notifications/…" method, no id so far) and
// noise (not starting with `{` or `[`) pass as before; anything else (a batch too) may be a
// request and is put to the sink like one, with what the
// prefix gives (the id when it comes before params, as most SDKs send it; the method; the
// tool). A denial refuses the whole line: none of its pieces is forwarded, and its end is
// answered with a JSON-RPC error (oversize_request_ends).
void Relay::oversize_request_starts(std::string_view prefix) {
    oversize_request_ = OversizeRequest::none;
    const Scan& sc = *client_scan_;
    if (!starts_like_json(prefix)) return;  // noise, as invalid as a short line of it
    if ((sc.has_result || sc.has_error) && !sc.has_method) return;
    if (sc.id_type == rpc::IdType::none && sc.method.rfind("notifications/", 0) == 0) return;
    ++stats_.requests;
    rpc::Message m;
    m.kind = rpc::Kind::request;
    m.id = rpc::Id{sc.id_type, sc.id};
    m.method = sc.method;
    m.tool = sc.tool;
    auto r = sink_->on_oversize_request(m, prefix);
    if (!r) {
        oversize_request_ = OversizeRequest::refused;
        oversize_denial_ = r.error();
        return;
    }
    oversize_request_ = OversizeRequest::recorded;
    oversize_record_ = *r;
    track(m, *r);  // now: a client lost before the last piece abandons it
}

// Its last piece: the id is known now wherever it stood (the TypeScript SDK writes it after
// params). A recorded request tracked without an id takes it, so its answer resolves the
// record; one that has none (a notification after all) keeps no id, which no answer matches,
// and is settled as abandoned when the session ends. A refused one is answered now.
void Relay::oversize_request_ends() {
    const Scan& sc = *client_scan_;
    if (oversize_request_ == OversizeRequest::refused) {
        rpc::Message m;
        m.kind = rpc::Kind::request;
        m.id = sc.id_type == rpc::IdType::none ? rpc::Id{rpc::IdType::null, "null"}
                                               : rpc::Id{sc.id_type, sc.id};
        deny(m, oversize_denial_);
    } else if (oversize_request_ == OversizeRequest::recorded && sc.id_type != rpc::IdType::none) {
        for (size_t i = n_outstanding_; i-- > 0;) {
            Outstanding& o = slots_[i];
            if (o.record != oversize_record_ || o.type != rpc::IdType::none) continue;
            o.type = sc.id_type;
            o.raw = sc.id;
            break;
        }
    }
    oversize_request_ = OversizeRequest::none;
}

// Parsed in place up to the parse limit; beyond it scanned (relay.hpp, "Long lines"), with
// `scan`, which no oversize line is using now (its pieces come one after the other).
rpc::Message Relay::classify(Scan& scan, const rpc::Frame& f) {
    auto content = f.content();
    if (content.size() <= opts_.parse_limit) return classifier_.classify(content, f.capacity);
    ++stats_.scanned;
    scan.reset();
    scan.feed(content);
    return scan.message(content);
}

bool Relay::guard_rejects(const rpc::Message& m, std::string_view content) const {
    if (opts_.guard == StdoutGuard::Pass) return false;
    if (m.json) return false;
    if (m.utf8_error && starts_like_json(content)) return false;
    return true;
}

void Relay::handle_server_frame(Stream& s, const rpc::Frame& f) {
    using rpc::Kind;
    if (f.kind == rpc::Frame::Kind::oversize) {
        if (f.first) {
            ++stats_.oversize_server;
            s.oversize_bytes = 0;
            divert_oversize_ = opts_.guard != StdoutGuard::Pass && !starts_like_json(f.bytes);
            if (divert_oversize_ && opts_.guard == StdoutGuard::Fail) {
                stop_server_output();
                forward_ = false;
                return;
            }
        }
        s.oversize_bytes += f.bytes.size();
        if (f.last) sink_->on_oversize(Direction::server_to_client, s.oversize_bytes);
        if (divert_oversize_) {
            divert(f);
            forward_ = false;
            return;
        }
        if (f.first) scan_->reset();
        scan_->feed(f.bytes);
        if (f.last)
            oversize_answer_read(*scan_, s.oversize_bytes - (f.bytes.size() - f.content().size()));
        return;
    }
    ++stats_.server_lines;
    if (f.kind == rpc::Frame::Kind::partial) ++stats_.partial_server;
    auto content = f.content();
    rpc::Message m = classify(*scan_, f);
    if (guard_rejects(m, content)) {
        forward_ = false;
        if (opts_.guard == StdoutGuard::Fail) {
            stop_server_output();
            return;
        }
        divert(f);
        return;
    }
    switch (m.kind) {
        case Kind::response:
            if (gate_ && gate_->server_response(m, content)) {
                forward_ = false;
                return;
            }
            answer_read(m, content);
            return;
        case Kind::request:
            ++stats_.server_requests;
            return;
        case Kind::notification:
            ++stats_.notifications;
            if (gate_) gate_->server_notification(m);
            sink_->on_notification(Direction::server_to_client, m);
            return;
        case Kind::invalid:
            ++stats_.invalid_server;
            sink_->on_invalid(Direction::server_to_client, content, m.reason);
            return;
        case Kind::batch:
            for (auto& member : *m.members)
                if (member.kind == Kind::response) answer_read(member, content);
            return;
    }
}

void Relay::stop_server_output() {
    // --stdout-guard=fail: nothing more of the server's stdout is forwarded.
    guard_failed_ = true;
    server_out_->eof = true;
    if (server_out_->registered) (void)ep_.remove(server_out_->fd);
    server_out_->registered = false;
}

// How many bytes diverted output may write now (relay.hpp, "Stdout guard"), and `by`, the
// cap that binds (Cap::none: none). Every byte written counts: the prefix, the escapes, the
// cut mark. The marks and notices that say a cap is reached may go past it; the bucket's
// ceiling and the total are kDivertReserve short of their caps, which keeps what is written
// within them, those included.
size_t Relay::divert_room(Cap& by) {
    const auto now = std::chrono::steady_clock::now();
    const double ceiling = static_cast<double>(opts_.divert_burst > kDivertReserve
                                                   ? opts_.divert_burst - kDivertReserve
                                                   : opts_.divert_burst);
    if (divert_filled_ == std::chrono::steady_clock::time_point{}) {
        divert_tokens_ = ceiling;
    } else {
        const double dt = std::chrono::duration<double>(now - divert_filled_).count();
        divert_tokens_ =
            std::min(ceiling, divert_tokens_ + dt * static_cast<double>(opts_.divert_rate));
    }
    divert_filled_ = now;
    size_t room = SIZE_MAX;
    by = Cap::none;
    auto cap = [&](size_t limit, Cap c) {
        if (limit >= room) return;
        room = limit;
        by = c;
    };
    const size_t queued = to_log_->queued();
    cap(queued >= opts_.stderr_cap ? 0 : opts_.stderr_cap - queued, Cap::stderr_full);
    if (opts_.divert_total) {
        const uint64_t total = opts_.divert_total > kDivertReserve
                                   ? opts_.divert_total - kDivertReserve
                                   : opts_.divert_total;
        cap(divert_written_ >= total ? 0 : static_cast<size_t>(total - divert_written_),
            Cap::total);
    }
    if (opts_.divert_rate)
        cap(divert_tokens_ < 1 ? 0 : static_cast<size_t>(divert_tokens_), Cap::rate);
    return room;
}

uint64_t& Relay::kept_back_by(Cap cap) {
    switch (cap) {
        case Cap::rate:
            return stats_.over_rate;
        case Cap::total:
            return stats_.over_total;
        default:
            return stats_.stderr_full;
    }
}

// A piece of a diverted line goes out as display text: the prefix (first piece), the piece
// escaped as `ps` escapes a command line (sys/text.hpp: a server's stdout must not drive the
// client's terminal), and a newline (last piece). A piece that does not fit in the room the
// caps leave is cut: what fits before " [cut]\n", nothing at all if not even one character
// does and nothing of the line is shown yet. Counted in the server's bytes: shown, or kept
// back by the cap that cut the line (its later pieces too).
void Relay::divert(const rpc::Frame& f) {
    static constexpr std::string_view kPrefix = "[mcpwarden] diverted non-JSON stdout line: ";
    static constexpr std::string_view kCut = " [cut]\n";
    const std::string_view text = f.last ? f.content() : f.bytes;
    if (f.first) {
        ++stats_.diverted;
        sink_->on_diverted(f.bytes);
        divert_cut_by_ = Cap::none;
        divert_showing_ = false;
    }
    stats_.diverted_bytes += f.bytes.size();
    if (divert_cut_by_ != Cap::none) {  // cut earlier: the rest is kept back by the same cap
        kept_back_by(divert_cut_by_) += f.bytes.size();
        return;
    }
    Cap by = Cap::none;
    const size_t room = divert_room(by);
    const std::string_view head = f.first ? kPrefix : std::string_view();
    const std::string_view end = f.last ? "\n" : "";
    scratch_.clear();
    if (room >= head.size() + end.size()) {
        scratch_ = head;
        if (append_escaped(scratch_, text, room - head.size() - end.size()) == text.size()) {
            scratch_ += end;
            stats_.diverted_shown += f.bytes.size();
            divert_showing_ = !f.last;
            divert_charge_and_write();
            return;
        }
    }
    scratch_.clear();
    size_t shown = 0;
    if (room > head.size() + kCut.size()) {
        scratch_ = head;
        shown = append_escaped(scratch_, text, room - head.size() - kCut.size());
    }
    if (shown > 0 || divert_showing_)
        scratch_ += kCut;
    else
        scratch_.clear();
    ++stats_.diverted_dropped;
    stats_.diverted_shown += shown;
    kept_back_by(by) += f.bytes.size() - shown;
    divert_cut_by_ = by;
    const bool total = by == Cap::total;
    bool& said = total ? said_total_ : said_rate_;
    if (by != Cap::stderr_full && !said) {
        said = true;
        scratch_ += "[mcpwarden] diverted stdout is capped at " +
                    std::to_string((total ? opts_.divert_total : opts_.divert_rate) >> 10) +
                    (total ? " KiB per session" : " KiB per second") +
                    ": what is over the cap is counted in session.end, not shown\n";
    }
    divert_charge_and_write();
}

void Relay::divert_charge_and_write() {
    if (scratch_.empty()) return;
    divert_tokens_ -= static_cast<double>(scratch_.size());
    divert_written_ += scratch_.size();
    (void)to_log_->put(scratch_);
}

// The refusal is the answer: one JSON-RPC error per request of `m` (a batch answers as one
// array). Slots from `answered` on were tracked for members of a batch recorded before the
// refused one: the refusal answers them when its last byte is written, as an error -32000,
// so their records are settled like any other call.
void Relay::deny(const rpc::Message& m, const Error& why, size_t answered) {
    ++stats_.denied;
    auto answer = [&](const rpc::Id& id) {
        append_error_answer(scratch_, id.raw, "mcpwarden: request refused: " + why.message);
    };
    scratch_.clear();
    if (m.kind == rpc::Kind::batch) {
        scratch_ += '[';
        bool first = true;
        for (auto& member : *m.members) {
            if (member.kind != rpc::Kind::request) continue;
            if (!first) scratch_ += ',';
            first = false;
            answer(member.id);
        }
        scratch_ += ']';
    } else {
        answer(m.id);
    }
    Answer refused;
    refused.outcome = rpc::Outcome::rpc_error;
    refused.error_code = kRefusedCode;
    refused.bytes = scratch_.size();
    scratch_ += '\n';
    const uint64_t end = to_client_->accepted + scratch_.size();
    for (size_t slot = answered; slot < n_outstanding_; ++slot)
        await_delivery(refused, slot, end);
    wrote_to_client(to_client_->put(scratch_));
}

void Relay::track(const rpc::Message& m, int64_t record) {
    // Slots are reused, never freed: their strings keep their capacity, so tracking a
    // request allocates nothing once the relay has warmed up.
    if (n_outstanding_ == slots_.size()) slots_.emplace_back();
    Outstanding& o = slots_[n_outstanding_++];
    o.type = m.id.type;
    o.raw.assign(m.id.raw);
    o.method.assign(m.method);
    o.tool.assign(m.tool);
    o.sent = std::chrono::steady_clock::now();
    o.record = record;
    o.answer = 0;
}

// The outstanding request a response with this id answers: one not answered yet (a second
// answer to the same id while the first is being delivered matches nothing).
size_t Relay::find_request(const rpc::Id& id) const {
    for (size_t i = 0; i < n_outstanding_; ++i)
        if (slots_[i].answer == 0 && slots_[i].type == id.type && slots_[i].raw == id.raw) return i;
    return SIZE_MAX;
}

void Relay::answer_read(const rpc::Message& m, std::string_view line) {
    ++stats_.responses;
    size_t slot = find_request(m.id);
    if (slot == SIZE_MAX) ++stats_.unmatched_responses;
    Answer a;
    a.outcome = m.outcome;
    a.bytes = line.size();
    if (m.outcome == rpc::Outcome::rpc_error) {
        // Error answers are rare and small: scanning one again for its code costs nothing on
        // the path that matters. No oversize line is in progress on the server stream here
        // (its pieces come one after the other), so scan_ is free.
        scan_->reset();
        scan_->feed(line);
        a.error_code = scan_->error_code;
    }
    await_delivery(a, slot, frame_end_);
}

void Relay::oversize_answer_read(const Scan& scan, size_t bytes) {
    if (!scan.response()) return;
    ++stats_.responses;
    size_t slot = find_request(rpc::Id{scan.id_type, scan.id});
    if (slot == SIZE_MAX) ++stats_.unmatched_responses;
    Answer a;
    a.outcome = scan.outcome();
    a.error_code = scan.error_code;
    a.bytes = bytes;
    await_delivery(a, slot, frame_end_);
}

// Called before the answer's bytes are put to the client sink: `end` is where its last byte
// will be in the sink's count (frame_end_ for a response being relayed).
void Relay::await_delivery(const Answer& a, size_t slot, uint64_t end) {
    if (to_client_->closed) return;  // the client is lost: nothing more is delivered
    uint64_t ticket = 0;
    if (slot != SIZE_MAX) slots_[slot].answer = ticket = ++last_ticket_;
    pending_.push_back(Pending{end, ticket, a});
}

void Relay::deliver_answers() {
    const uint64_t written = to_client_->written;
    while (pending_head_ < pending_.size() && pending_[pending_head_].end <= written) {
        const Pending& p = pending_[pending_head_++];
        size_t slot = SIZE_MAX;
        for (size_t i = 0; p.ticket && i < n_outstanding_; ++i)
            if (slots_[i].answer == p.ticket) slot = i;
        sink_->on_response(p.answer, slot == SIZE_MAX ? nullptr : &slots_[slot]);
        if (slot != SIZE_MAX) {
            // Slots are reused, never freed (track()): the last one takes this one's place.
            std::swap(slots_[slot], slots_[n_outstanding_ - 1]);
            --n_outstanding_;
        }
    }
    if (pending_head_ == pending_.size()) {
        pending_.clear();
        pending_head_ = 0;
    } else if (pending_head_ >= 64 && pending_head_ * 2 >= pending_.size()) {
        // A client that always lags never empties the FIFO: drop the delivered front in place.
        pending_.erase(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(pending_head_));
        pending_head_ = 0;
    }
}

// After a write to the client: what it now wholly has is answered; a reader that is gone is the
// client's loss (reported by the next poll()).
void Relay::wrote_to_client(bool ok) {
    if (ok) {
        if (pending_head_ < pending_.size()) deliver_answers();
        return;
    }
    if (loss_ != ClientLoss::none) return;
    client_lost(ClientLoss::stdout_closed);
    loss_reported_ = false;
}

std::optional<Relay::Wake> Relay::pending_wake() {
    if (guard_failed_ && !guard_reported_) {
        guard_reported_ = true;
        return Wake{Wake::What::guard_failed, 0, 0, loss_};
    }
    if (loss_ != ClientLoss::none && !loss_reported_) {
        loss_reported_ = true;
        return Wake{Wake::What::client_lost, 0, 0, loss_};
    }
    if (gate_ && gate_->wants_attention()) return Wake{Wake::What::gate, 0, 0, loss_};
    if (!server_closed_reported_ && server_closed()) {
        server_closed_reported_ = true;
        return Wake{Wake::What::server_closed, 0, 0, loss_};
    }
    return std::nullopt;
}

Result<std::optional<Relay::Wake>> Relay::pump(int timeout_ms) {
    // Fds epoll cannot watch (regular files, /dev/null) are always ready: do not sleep.
    bool busy = false;
    for (Stream* s : {client_.get(), server_out_.get(), server_err_.get()})
        if (!s->pollable && wants_input(*s)) busy = true;
    for (Sink* s : {to_server_.get(), to_client_.get(), to_log_.get()})
        if (!s->pollable && !s->closed && s->queued() > 0) busy = true;
    auto n = ep_.wait(events_, busy ? 0 : timeout_ms);
    if (!n) return n.error();
    std::optional<Wake> watched;
    for (int i = 0; i < *n; ++i) {
        const auto& ev = events_[static_cast<size_t>(i)];
        uint32_t token = static_cast<uint32_t>(ev.data.u64 & 0xffffffffu);
        if ((ev.data.u64 >> 32) == kWatched) {
            if (!watched) watched = Wake{Wake::What::watched, token, ev.events, loss_};
            continue;
        }
        switch (token) {
            case kClientIn:
                on_readable(*client_);
                break;
            case kServerOut:
                on_readable(*server_out_);
                break;
            case kServerErr:
                on_readable(*server_err_);
                break;
            case kServerIn:
            case kClientOut:
            case kLog: {
                Sink& s = token == kServerIn    ? *to_server_
                          : token == kClientOut ? *to_client_
                                                : *to_log_;
                bool ok = (ev.events & EPOLLERR) ? s.fail() : s.flush();
                if (!ok) {
                    if (s.registered) (void)ep_.remove(s.fd);
                    s.registered = false;
                }
                if (&s == to_client_.get()) wrote_to_client(ok);
                break;
            }
        }
    }
    if (busy) {
        for (Stream* s : {client_.get(), server_out_.get(), server_err_.get()})
            if (!s->pollable && wants_input(*s)) on_readable(*s);
        for (Sink* s : {to_server_.get(), to_client_.get(), to_log_.get()}) {
            if (s->pollable) continue;
            bool ok = s->flush();
            if (s == to_client_.get()) wrote_to_client(ok);
        }
    }
    update_interest();
    return watched;
}

Result<Relay::Wake> Relay::poll(int timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        if (auto w = pending_wake()) return *w;
        int t = -1;
        if (timeout_ms >= 0) {
            // Rounded up: epoll_wait counts whole milliseconds, and a remainder rounded down
            // to 0 would return at once and come round again, spinning until the deadline.
            auto left = std::chrono::ceil<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            t = static_cast<int>(std::max<int64_t>(0, left.count()));
        }
        auto r = pump(t);
        if (!r) return r.error();
        if (auto w = pending_wake()) return *w;
        if (*r) return **r;
        if (timeout_ms >= 0 && std::chrono::steady_clock::now() >= deadline)
            return Wake{Wake::What::timeout, 0, 0, loss_};
    }
}

// ---- Hibernation -------------------------------------------------------------------------

void Relay::answer_client(std::string_view line) {
    scratch_.assign(line);
    scratch_ += '\n';
    wrote_to_client(to_client_->put(scratch_));
}

std::optional<std::chrono::steady_clock::time_point> Relay::idle_since() const {
    if (n_outstanding_ > 0 || stats_.server_requests > stats_.client_responses) return std::nullopt;
    if (to_server_->queued() > 0 || to_client_->queued() > 0 || pending_head_ < pending_.size())
        return std::nullopt;
    if (client_->framer.pending() > 0 || server_out_->framer.pending() > 0) return std::nullopt;
    if (oversize_request_ != OversizeRequest::none) return std::nullopt;
    return last_activity_;
}

void Relay::detach_server() {
    Sink& s = *to_server_;
    if (s.registered) (void)ep_.remove(s.fd);
    s.registered = false;
    s.want_out = false;
    s.owned.reset();
    s.fd = -1;
    s.close_when_drained = false;
    s.closed = false;
    s.held = true;
    s.q.clear();
    s.head = 0;
}

Status Relay::attach_server(Fd server_in, Fd server_out, Fd server_err) {
    // The last server's streams are at their EOF (its tree is gone); whatever they still
    // hold in a framer is the last server's and ends here.
    for (Stream* st : {server_out_.get(), server_err_.get()})
        if (st->registered) (void)ep_.remove(st->fd);
    server_out_ = make_stream(-1, std::move(server_out), kServerOut, Direction::server_to_client,
                              true, to_client_.get());
    server_err_ = make_stream(-1, std::move(server_err), kServerErr, Direction::server_to_client,
                              false, to_log_.get());
    for (Stream* st : {server_out_.get(), server_err_.get()})
        if (auto r = register_stream(*st); !r) return r;
    Sink& s = *to_server_;
    s.owned = std::move(server_in);
    s.fd = s.owned.get();
    (void)set_nonblocking(s.fd, true);
    s.closed = false;
    s.want_out = false;
    auto r = ep_.add(s.fd, 0, tag(kInternal, s.token));
    if (!r) return r;
    s.registered = true;
    server_closed_reported_ = false;
    guard_failed_ = guard_reported_ = false;
    return {};
}

bool Relay::write_to_server_now(std::string_view bytes) {
    Sink& s = *to_server_;
    if (s.fd < 0) return false;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (!bytes.empty()) {
        ssize_t r = ::write(s.fd, bytes.data(), bytes.size());
        if (r > 0) {
            bytes.remove_prefix(static_cast<size_t>(r));
            continue;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EAGAIN && std::chrono::steady_clock::now() < deadline) {
            pollfd p{s.fd, POLLOUT, 0};
            (void)::poll(&p, 1, 100);
            continue;
        }
        return false;
    }
    return true;
}

void Relay::release_server_input() {
    Sink& s = *to_server_;
    s.held = false;
    if (!s.flush() && s.registered) {
        (void)ep_.remove(s.fd);
        s.registered = false;
    }
    update_interest();
}

// As deny(): the errors go out as one write, and each request is answered when its last byte
// is; one line per request (members of a batch too: the batch was never forwarded whole).
void Relay::fail_held_requests(std::string_view why, bool spare_streams) {
    to_server_->q.clear();
    to_server_->head = 0;
    scratch_.clear();
    std::vector<size_t> slots;
    for (size_t slot = 0; slot < n_outstanding_; ++slot) {
        const Outstanding& o = slots_[slot];
        if (o.answer != 0) continue;
        if (spare_streams && o.method == "subscriptions/listen") continue;
        slots.push_back(slot);
        append_error_answer(scratch_, o.raw.empty() ? "null" : o.raw, why);
        scratch_ += '\n';
    }
    if (slots.empty()) return;
    Answer failed;
    failed.outcome = rpc::Outcome::rpc_error;
    failed.error_code = kRefusedCode;
    failed.bytes = scratch_.size() / slots.size();
    const uint64_t end = to_client_->accepted + scratch_.size();
    for (size_t slot : slots)
        await_delivery(failed, slot, end);
    wrote_to_client(to_client_->put(scratch_));
}

void Relay::drain(int timeout_ms) {
    for (int fd : watched_)
        (void)ep_.remove(fd);
    watched_.clear();
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        bool sources_done = server_out_->eof && server_err_->eof;
        bool flushed = (to_client_->closed || to_client_->queued() == 0) &&
                       (to_log_->closed || to_log_->queued() == 0);
        if (sources_done && flushed) return;
        auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now());
        if (left.count() <= 0) return;
        if (!pump(static_cast<int>(left.count()))) return;
    }
}

}  // namespace warden::shim
