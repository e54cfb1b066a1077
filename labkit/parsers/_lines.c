/* The commonest lines of the two large logs labkit imports, read in compiled code: ping's plain reply and the
 * 2016 Go echo client's "received" line. Python (labkit/parsers/compiled.py) finds the lines of a chunk and
 * calls these through ctypes with the GIL released; a line that is not exactly the plain shape is left to the
 * parser's regex and line-by-line code, which reads every shape. So these functions accept only what the
 * patterns _PLAIN_REPLY (labkit/parsers/ping.py) and _PLAIN_ECHO (labkit/parsers/goclient.py) accept, and give
 * the same values; tests/test_parsers_stream.py holds the two ways to the same rows on recorded logs.
 *
 * Each function reads lines [starts[i], ends[i]) of buf (ends without the newline) and writes the fields of the
 * k-th plain line at index k of its outputs, that line's index at line[k], and returns how many it read.
 * Strings (the address) go into one buffer with 64-bit offsets, as an Arrow large_string array holds them.
 *
 * A time is written as int64 nanoseconds since the epoch (numpy's datetime64[ns]): a line whose time that cannot
 * hold (before 1677-09-21 00:12:43.145224193 or after 2262-04-11 23:47:16.854775807 UTC) is left to the Python code,
 * which refuses it naming the line, never wrapped round to another date.
 *
 * Built by scripts/bootstrap.sh: cc -O2 -Wall -shared -fPIC -o labkit/parsers/_lines.so labkit/parsers/_lines.c
 */
#include <stdint.h>
#include <string.h>

/* Raised whenever a function's arguments or meaning change: Python loads a library of its own version only. */
int32_t labkit_lines_version(void) { return 2; }

typedef struct {
    const uint8_t *p, *end;
} cursor;

static int literal(cursor *c, const char *text, int64_t length) {
    if (c->end - c->p < length || memcmp(c->p, text, (size_t)length) != 0) return 0;
    c->p += length;
    return 1;
}

/* 1 to most digits: their value. */
static int digits(cursor *c, int most, int64_t *value) {
    int64_t v = 0;
    int n = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        if (++n > most) return 0;
        v = v * 10 + (*c->p++ - '0');
    }
    *value = v;
    return n > 0;
}

/* Exactly n digits. */
static int fixed(cursor *c, int n, int64_t *value) {
    int64_t v = 0;
    for (int i = 0; i < n; i++) {
        if (c->p >= c->end || *c->p < '0' || *c->p > '9') return 0;
        v = v * 10 + (*c->p++ - '0');
    }
    *value = v;
    return 1;
}

/* 1 to whole digits, then optionally "." and 1 to frac digits: all digits as one integer, how many follow the
 * dot, and the integer part. At most 18 digits in all (the caller may ask for fewer). */
static int decimal(cursor *c, int whole, int frac, int64_t *all, int *decimals, int64_t *integer) {
    int64_t v = 0;
    int n = 0, f = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        if (++n > whole) return 0;
        v = v * 10 + (*c->p++ - '0');
    }
    if (n == 0) return 0;
    *integer = v;
    if (c->p < c->end && *c->p == '.') {
        c->p++;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            if (++f > frac || n + f > 18) return 0;
            v = v * 10 + (*c->p++ - '0');
        }
        if (f == 0) return 0;
    }
    *all = v;
    *decimals = f;
    return 1;
}

/* 1 (or 0 when empty_ok) to most bytes of [A-Za-z0-9._-] (and ':' when colon_ok), up to stop. */
static int name(cursor *c, int most, int empty_ok, int colon_ok, uint8_t stop, const uint8_t **start) {
    *start = c->p;
    while (c->p < c->end && *c->p != stop) {
        uint8_t b = *c->p;
        if (!((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9') || b == '.' || b == '_' ||
              b == '-' || (colon_ok && b == ':')))
            return 0;
        c->p++;
    }
    int64_t n = c->p - *start;
    return (n >= (empty_ok ? 0 : 1)) && n <= most && c->p < c->end;
}

static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12,
                               1e13, 1e14, 1e15, 1e16, 1e17, 1e18};
static const int64_t IPOW10[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000};

/* ping:  [1478089496.123456] 64 bytes from 10.0.0.1: icmp_seq=1 ttl=64 time=0.045 ms (DUP!)
 * (the stamp, "icmp_" and " (DUP!)" optional). stamp_ns is that of a stamped line (stamped[k] = 1); rtt_ms is
 * the nearest double to the decimal written (its digits and the power of ten are both exact doubles when it has at
 * most 15 digits, and IEEE division rounds their quotient once; a longer time is left to the regex). */
int64_t ping_plain(const uint8_t *buf, const int64_t *starts, const int64_t *ends, int64_t n, int64_t *line,
                   int64_t *seq, int64_t *ttl, int64_t *size, double *rtt_ms, int64_t *stamp_ns, uint8_t *stamped,
                   uint8_t *dup, int64_t *source_offsets, uint8_t *source_data) {
    int64_t k = 0;
    source_offsets[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        cursor c = {buf + starts[i], buf + ends[i]};
        int64_t whole = 0, all = 0, time_digits, integer;
        int decimals = 0, time_decimals;
        int has_stamp = c.p < c.end && *c.p == '[';
        if (has_stamp) {
            c.p++;
            if (!decimal(&c, 12, 12, &all, &decimals, &whole) || !literal(&c, "] ", 2)) continue;
            if (whole >= 9000000000LL) continue; /* near the end of 64-bit nanoseconds (2255): left to Python */
        }
        const uint8_t *source;
        if (!digits(&c, 9, &size[k]) || !literal(&c, " bytes from ", 12)) continue;
        if (!name(&c, 64, 0, 0, ':', &source)) continue;
        int64_t source_length = c.p - source;
        if (!literal(&c, ": ", 2)) continue;
        if (!literal(&c, "icmp_seq=", 9) && !literal(&c, "seq=", 4)) continue;
        if (!digits(&c, 9, &seq[k]) || !literal(&c, " ttl=", 5) || !digits(&c, 9, &ttl[k])) continue;
        if (!literal(&c, " time=", 6) || !decimal(&c, 12, 12, &time_digits, &time_decimals, &integer)) continue;
        if (time_digits >= (1LL << 53) || !literal(&c, " ms", 3)) continue;
        int is_dup = literal(&c, " (DUP!)", 7);
        if (c.p != c.end) continue;
        if (has_stamp) {
            int64_t scale = 1;
            for (int d = 0; d < decimals; d++) scale *= 10;
            int64_t frac = all - whole * scale;
            stamp_ns[k] = whole * 1000000000LL +
                          (decimals <= 9 ? frac * IPOW10[9 - decimals] : frac / (scale / 1000000000LL));
        } else {
            stamp_ns[k] = 0;
        }
        rtt_ms[k] = (double)time_digits / POW10[time_decimals];
        stamped[k] = (uint8_t)has_stamp;
        dup[k] = (uint8_t)is_dup;
        memcpy(source_data + source_offsets[k], source, (size_t)source_length);
        source_offsets[k + 1] = source_offsets[k] + source_length;
        line[k++] = i;
    }
    return k;
}

/* Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int days_in_month(int64_t y, int64_t m) {
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return days[m - 1] + (m == 2 && leap);
}

/* The Go echo client:  2016/11/02 12:24:56 received 50 bytes from orca (128.8.126.120:3265) order=1 seq=1
 * time=27.355185ms. naive_ns is the stamp's wall-clock time read as UTC (a date or time that does not exist is
 * left to the line-by-line code, which names the line); nanos is the duration in integer nanoseconds, as
 * labkit.parsers.godur truncates it; unit 0 s, 1 ms, 2 µs (us, µs or μs), 3 ns. */
int64_t echo_plain(const uint8_t *buf, const int64_t *starts, const int64_t *ends, int64_t n, int64_t *line,
                   int64_t *naive_ns, int64_t *size, int64_t *order, int64_t *seq, int64_t *nanos, uint8_t *unit,
                   int64_t *peer_offsets, uint8_t *peer_data) {
    static const int64_t SCALE[] = {1000000000LL, 1000000LL, 1000LL, 1LL};
    int64_t k = 0;
    peer_offsets[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        cursor c = {buf + starts[i], buf + ends[i]};
        int64_t y, mo, d, h, mi, s, whole, all;
        int decimals;
        const uint8_t *peer, *host;
        if (!fixed(&c, 4, &y) || !literal(&c, "/", 1) || !fixed(&c, 2, &mo) || !literal(&c, "/", 1) ||
            !fixed(&c, 2, &d) || !literal(&c, " ", 1) || !fixed(&c, 2, &h) || !literal(&c, ":", 1) ||
            !fixed(&c, 2, &mi) || !literal(&c, ":", 1) || !fixed(&c, 2, &s))
            continue;
        if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || s > 59) continue;
        if (!literal(&c, " received ", 10) || !digits(&c, 9, &size[k]) || !literal(&c, " bytes from ", 12)) continue;
        if (!name(&c, 64, 0, 0, ' ', &host) || !literal(&c, " (", 2)) continue;
        if (!name(&c, 64, 1, 1, ')', &peer)) continue;
        int64_t peer_length = c.p - peer;
        if (!literal(&c, ") order=", 8) || !digits(&c, 9, &order[k]) || !literal(&c, " seq=", 5) ||
            !digits(&c, 9, &seq[k]) || !literal(&c, " time=", 6))
            continue;
        if (!decimal(&c, 9, 9, &all, &decimals, &whole)) continue;
        int u;
        if (c.end - c.p == 1 && c.p[0] == 's') u = 0;
        else if (c.end - c.p == 2 && c.p[0] == 'm' && c.p[1] == 's') u = 1;
        else if (c.end - c.p == 2 && c.p[0] == 'u' && c.p[1] == 's') u = 2;
        else if (c.end - c.p == 3 && ((c.p[0] == 0xC2 && c.p[1] == 0xB5) || (c.p[0] == 0xCE && c.p[1] == 0xBC)) &&
                 c.p[2] == 's') u = 2;
        else if (c.end - c.p == 2 && c.p[0] == 'n' && c.p[1] == 's') u = 3;
        else continue;
        /* Whole seconds of years 1 to 9999 fit 64 bits; as nanoseconds only those from 1677-09-21 00:12:44 to
         * 2262-04-11 23:47:16 do. */
        int64_t seconds = ((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60 + s;
        if (seconds < -(INT64_MAX / 1000000000LL) || seconds > INT64_MAX / 1000000000LL) continue;
        int64_t frac = all - whole * IPOW10[decimals];
        nanos[k] = whole * SCALE[u] + frac * SCALE[u] / IPOW10[decimals];
        unit[k] = (uint8_t)u;
        naive_ns[k] = seconds * 1000000000LL;
        memcpy(peer_data + peer_offsets[k], peer, (size_t)peer_length);
        peer_offsets[k + 1] = peer_offsets[k] + peer_length;
        line[k++] = i;
    }
    return k;
}
