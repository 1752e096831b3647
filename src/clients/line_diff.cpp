#include "clients/line_diff.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

namespace warden::clients {
namespace {

// Lines with their '\n' (the last one may lack it), so "x" and "x\n" differ.
std::vector<std::string_view> split_lines(std::string_view t) {
    std::vector<std::string_view> out;
    size_t i = 0;
    while (i < t.size()) {
        size_t nl = t.find('\n', i);
        size_t end = nl == std::string_view::npos ? t.size() : nl + 1;
        out.push_back(t.substr(i, end - i));
        i = end;
    }
    return out;
}

enum class Op { Equal, Delete, Insert };
struct Step {
    Op op;
    size_t a;  // index into the old lines (Equal, Delete)
    size_t b;  // index into the new lines (Equal, Insert)
};

// Myers' greedy shortest edit script between a[lo_a, hi_a) and b[lo_b, hi_b).
void myers(const std::vector<std::string_view>& a, const std::vector<std::string_view>& b,
           size_t lo_a, size_t hi_a, size_t lo_b, size_t hi_b, std::vector<Step>& out) {
    const long n = static_cast<long>(hi_a - lo_a), m = static_cast<long>(hi_b - lo_b);
    const long max = n + m;
    const long off = max + 1;
    std::vector<long> v(static_cast<size_t>(2 * max + 3), 0);
    std::vector<std::vector<long>> trace;
    auto at = [&](std::vector<long>& vec, long k) -> long& {
        return vec[static_cast<size_t>(k + off)];
    };
    auto eq = [&](long x, long y) {
        return a[lo_a + static_cast<size_t>(x)] == b[lo_b + static_cast<size_t>(y)];
    };
    long found = -1;
    for (long d = 0; d <= max && found < 0; ++d) {
        trace.push_back(v);
        for (long k = -d; k <= d; k += 2) {
            long x = (k == -d || (k != d && at(v, k - 1) < at(v, k + 1))) ? at(v, k + 1)
                                                                          : at(v, k - 1) + 1;
            long y = x - k;
            while (x < n && y < m && eq(x, y))
                ++x, ++y;
            at(v, k) = x;
            if (x >= n && y >= m) {
                found = d;
                break;
            }
        }
    }
    std::vector<Step> rev;
    long x = n, y = m;
    for (long d = found; d >= 0; --d) {
        auto& vd = trace[static_cast<size_t>(d)];
        long k = x - y;
        long pk = (k == -d || (k != d && at(vd, k - 1) < at(vd, k + 1))) ? k + 1 : k - 1;
        long px = at(vd, pk), py = px - pk;
        while (x > px && y > py) {
            --x, --y;
            rev.push_back(
                {Op::Equal, lo_a + static_cast<size_t>(x), lo_b + static_cast<size_t>(y)});
        }
        if (d == 0) break;
        if (x == px)
            rev.push_back(
                {Op::Insert, lo_a + static_cast<size_t>(x), lo_b + static_cast<size_t>(py)});
        else
            rev.push_back(
                {Op::Delete, lo_a + static_cast<size_t>(px), lo_b + static_cast<size_t>(y)});
        x = px;
        y = py;
    }
    out.insert(out.end(), rev.rbegin(), rev.rend());
}

void print_line(std::string& out, char mark, std::string_view line) {
    out += mark;
    if (!line.empty() && line.back() == '\n') {
        out += line;
    } else {
        out += line;
        out += "\n\\ No newline at end of file\n";
    }
}

std::string range(size_t start, size_t count) {
    // `diff -u` numbers from 1; an empty range names the line before it.
    size_t first = count == 0 ? start : start + 1;
    return count == 1 ? fmt::format("{}", first) : fmt::format("{},{}", first, count);
}

}  // namespace

std::string unified_diff(std::string_view before, std::string_view after, std::string_view old_name,
                         std::string_view new_name, size_t context) {
    if (before == after) return {};
    auto a = split_lines(before), b = split_lines(after);

    // Common head and tail first: the script between them is what Myers has to find.
    size_t head = 0;
    while (head < a.size() && head < b.size() && a[head] == b[head])
        ++head;
    size_t tail = 0;
    while (tail < a.size() - head && tail < b.size() - head &&
           a[a.size() - 1 - tail] == b[b.size() - 1 - tail])
        ++tail;
    std::vector<Step> steps;
    for (size_t i = 0; i < head; ++i)
        steps.push_back({Op::Equal, i, i});
    myers(a, b, head, a.size() - tail, head, b.size() - tail, steps);
    for (size_t i = tail; i > 0; --i)
        steps.push_back({Op::Equal, a.size() - i, b.size() - i});

    std::string out = fmt::format("--- {}\n+++ {}\n", old_name, new_name);
    auto is_change = [&](size_t i) { return steps[i].op != Op::Equal; };
    size_t i = 0;
    while (i < steps.size()) {
        size_t c = i;
        while (c < steps.size() && !is_change(c))
            ++c;
        if (c == steps.size()) break;
        size_t start = c >= i + context ? c - context : i;
        // Extend the hunk over changes separated by at most 2·context equal lines.
        size_t last = c, j = c;
        while (j < steps.size()) {
            if (is_change(j)) {
                last = j++;
                continue;
            }
            size_t run = j;
            while (run < steps.size() && !is_change(run))
                ++run;
            if (run == steps.size() || run - j > 2 * context) break;
            j = run;
        }
        size_t end = std::min(steps.size(), last + context + 1);

        // Line numbers where the hunk starts: the old/new lines consumed before `start`.
        size_t a_pos = 0, b_pos = 0, a_count = 0, b_count = 0;
        for (size_t s = 0; s < start; ++s) {
            if (steps[s].op != Op::Insert) ++a_pos;
            if (steps[s].op != Op::Delete) ++b_pos;
        }
        for (size_t s = start; s < end; ++s) {
            if (steps[s].op != Op::Insert) ++a_count;
            if (steps[s].op != Op::Delete) ++b_count;
        }
        out += fmt::format("@@ -{} +{} @@\n", range(a_pos, a_count), range(b_pos, b_count));
        for (size_t s = start; s < end; ++s) {
            const Step& st = steps[s];
            if (st.op == Op::Equal) print_line(out, ' ', a[st.a]);
            if (st.op == Op::Delete) print_line(out, '-', a[st.a]);
            if (st.op == Op::Insert) print_line(out, '+', b[st.b]);
        }
        i = end;
    }
    return out;
}

}  // namespace warden::clients
