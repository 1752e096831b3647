#include "clients/wrap.hpp"

#include <algorithm>

namespace warden::clients {

bool is_mcpwarden_program(std::string_view program, std::string_view ours) {
    if (!ours.empty() && program == ours) return true;
    size_t slash = program.rfind('/');
    std::string_view base = slash == std::string_view::npos ? program : program.substr(slash + 1);
    return base == "mcpwarden";
}

bool is_wrapped(const ServerEntry& e, std::string_view ours) {
    return !e.remote && e.problem.empty() && is_mcpwarden_program(e.program.value, ours) &&
           !e.args.empty() && e.args[0].value == "run";
}

// `mcpwarden run` options that take no value (src/cli/run_cmd.cpp); every other `--opt`
// written without `=` takes the next argument as its value, whatever it looks like: a server
// named "--" is wrapped as `run --name -- -- CMD`, and its name is not the separator.
static bool is_run_flag(std::string_view a) {
    return a == "--no-journal" || a == "--explain" || a == "--share";
}

std::optional<InnerCommand> inner_command(const ServerEntry& e) {
    for (size_t k = 1; k < e.args.size(); ++k) {
        std::string_view a = e.args[k].value;
        if (a != "--") {
            if (a.starts_with("--") && a.find('=') == std::string_view::npos && !is_run_flag(a))
                ++k;  // its value
            continue;
        }
        if (k + 1 >= e.args.size()) return std::nullopt;
        InnerCommand inner;
        inner.index = k + 1;
        inner.command = e.args[k + 1].value;
        for (size_t i = k + 2; i < e.args.size(); ++i)
            inner.args.push_back(e.args[i].value);
        return inner;
    }
    return std::nullopt;
}

namespace {

struct Edit {
    size_t at;
    size_t len;
    std::string text;
};

std::string raw(std::string_view t, Span s) {
    return std::string(t.substr(s.begin, s.size()));
}

void wrap_edits(std::string_view t, const ServerEntry& e, const WrapOptions& o,
                std::vector<Edit>& edits) {
    std::vector<std::string> head = {quote_string("run"), quote_string("--name"),
                                     quote_string(e.name)};
    if (!o.sandbox.empty()) {
        head.push_back(quote_string("--sandbox"));
        head.push_back(quote_string(o.sandbox));
    }
    if (o.share) head.push_back(quote_string("--share"));
    head.push_back(quote_string("--"));
    head.push_back(raw(t, e.program.span));
    edits.push_back({e.program.span.begin, e.program.span.size(), quote_string(o.mcpwarden)});
    if (!e.has_args) {
        std::string list;
        for (const auto& h : head)
            list += (list.empty() ? "" : ", ") + h;
        edits.push_back(
            {e.insert_at, 0, e.insert_prefix + e.args_key + "[" + list + "]" + e.insert_suffix});
    } else if (e.args.empty()) {
        std::string list;
        for (const auto& h : head)
            list += (list.empty() ? "" : ", ") + h;
        edits.push_back({e.args_span.end - 1, 0, list});  // before the ']'
    } else {
        std::string sep = separator_before(t, e.args[0].span.begin);
        std::string ins;
        for (const auto& h : head)
            ins += h + "," + sep;
        edits.push_back({e.args[0].span.begin, 0, ins});
    }
}

// `added_args`: whether wrap added the args member (then it goes again, when it is still
// where wrap puts it), rather than filling an `"args": []` that was there.
void unwrap_edits(std::string_view t, const ServerEntry& e, const InnerCommand& inner,
                  bool added_args, std::vector<Edit>& edits) {
    const auto& args = e.args;
    edits.push_back({e.program.span.begin, e.program.span.size(), raw(t, args[inner.index].span)});
    if (inner.index + 1 < args.size()) {
        size_t from = args[0].span.begin;
        edits.push_back({from, args[inner.index + 1].span.begin - from, {}});
    } else if (added_args && e.args_before_program) {
        edits.push_back({e.args_member.begin, e.args_member.size(), {}});
    } else {
        size_t from = args[0].span.begin;
        edits.push_back({from, args.back().span.end - from, {}});
    }
}

// Why unwrap must leave a wrapped entry alone, or nullopt when it is wrap's to take back:
// recorded, and still reading as recorded.
std::optional<std::string> not_ours(const ServerEntry& e, const WrapOptions& o) {
    if (!o.recorded || o.unrecorded) return std::nullopt;
    const RecordedEntry* rec = find_recorded(*o.recorded, e.scope, e.project, e.name);
    if (!rec)
        return std::string(
            "wrapped by hand, not by mcpwarden wrap: left alone (--unrecorded unwraps it)");
    std::vector<std::string> now;
    for (const auto& a : e.args)
        now.push_back(a.value);
    if (e.program.value != rec->command || now != rec->args)
        return std::string(
            "changed since mcpwarden wrap wrote it: left alone (--unrecorded unwraps it)");
    return std::nullopt;
}

std::string apply(std::string_view t, std::vector<Edit> edits) {
    std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) { return a.at > b.at; });
    std::string out(t);
    for (const auto& ed : edits)
        out.replace(ed.at, ed.len, ed.text);
    return out;
}

// Reads the new text back: it must parse, and every entry we changed must now say what we
// meant (wrapped around the same command and args, or unwrapped to them). A failure here is
// a bug in the edit, and the file is then left alone.
Status verify(const std::vector<ServerEntry>& before, const Rewrite& rw, Format format,
              Layout layout, Scope scope, Action action, const WrapOptions& options) {
    auto after = read_entries(rw.text, format, layout, scope);
    if (!after)
        return Error::msg("the edited text no longer parses (" + after.error().message + ")");
    auto values = [](const std::vector<StringToken>& v, size_t from) {
        std::vector<std::string> out;
        for (size_t i = from; i < v.size(); ++i)
            out.push_back(v[i].value);
        return out;
    };
    for (const auto& r : rw.entries) {
        if (r.outcome != Outcome::Changed) continue;
        auto same = [&](const ServerEntry& e) {
            return e.name == r.name && e.scope == r.scope && e.project == r.project;
        };
        // The last entry of a name is the one the client reads (and the only one edited).
        auto b = std::find_if(before.rbegin(), before.rend(), same);
        auto a = std::find_if(after->rbegin(), after->rend(), same);
        bool ok = b != before.rend() && a != after->rend() && a->problem.empty();
        if (ok && action == Action::Wrap) {
            auto inner = inner_command(*a);
            ok = is_wrapped(*a, options.mcpwarden) && inner && inner->command == b->program.value &&
                 inner->args == values(b->args, 0);
            ok = ok && a->program.value == r.command && values(a->args, 0) == r.args;
        } else if (ok) {
            auto inner = inner_command(*b);
            ok = inner && a->program.value == inner->command && values(a->args, 0) == inner->args;
        }
        if (!ok)
            return Error::msg("internal error: the edit of server " + r.name + " did not verify");
    }
    return {};
}

}  // namespace

Result<Rewrite> rewrite_text(std::string_view text, Format format, Layout layout, Scope scope,
                             Action action, const WrapOptions& options) {
    auto entries = read_entries(text, format, layout, scope);
    if (!entries) return entries.error();
    Rewrite rw;
    std::vector<Edit> edits;
    for (const auto& e : *entries) {
        if (options.server && e.name != *options.server) continue;
        EntryResult r;
        r.name = e.name;
        r.scope = e.scope;
        r.project = e.project;
        if (e.remote) {
            r.outcome = Outcome::Remote;
        } else if (!e.problem.empty()) {
            r.reason = e.problem;
        } else if (action == Action::Wrap) {
            if (is_wrapped(e, options.mcpwarden)) {
                r.outcome = Outcome::Already;
            } else {
                wrap_edits(text, e, options, edits);
                r.outcome = Outcome::Changed;
                r.command = options.mcpwarden;
                r.args = {"run", "--name", e.name};
                if (!options.sandbox.empty())
                    r.args.insert(r.args.end(), {"--sandbox", options.sandbox});
                if (options.share) r.args.push_back("--share");
                r.args.insert(r.args.end(), {"--", e.program.value});
                for (const auto& a : e.args)
                    r.args.push_back(a.value);
                r.added_args = !e.has_args;
            }
        } else if (!is_wrapped(e, options.mcpwarden)) {
            r.outcome = Outcome::Already;
        } else if (auto why = not_ours(e, options)) {
            r.reason = *why;
        } else if (auto inner = inner_command(e)) {
            // Without a record entry (none given, or --unrecorded) an args member in wrap's
            // spot is taken to be wrap's.
            const RecordedEntry* rec =
                options.recorded ? find_recorded(*options.recorded, e.scope, e.project, e.name)
                                 : nullptr;
            unwrap_edits(text, e, *inner, rec ? rec->added_args : true, edits);
            r.outcome = Outcome::Changed;
        } else {
            r.reason = "wrapped, but its args hold no \"--\" followed by a command";
        }
        rw.entries.push_back(std::move(r));
    }
    rw.changed = !edits.empty();
    rw.text = apply(text, std::move(edits));
    if (rw.changed) {
        if (auto st = verify(*entries, rw, format, layout, scope, action, options); !st)
            return st.error();
    }
    return rw;
}

}  // namespace warden::clients
