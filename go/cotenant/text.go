// This file owns the small text helpers every parser shares, written to split and trim
// exactly as the Rust parsers do (str::lines, split_ascii_whitespace, procfs::parse_u64), so
// that both implementations accept and reject the same inputs.

package cotenant

import (
	"strconv"
	"strings"
	"unicode"
)

func isSpace(r rune) bool { return unicode.IsSpace(r) }

// isASCIISpace is Rust's u8::is_ascii_whitespace: space, \t, \n, \f and \r (not \v).
func isASCIISpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\f' || r == '\r'
}

// fieldsASCII splits on runs of ASCII white space (Rust's split_ascii_whitespace).
func fieldsASCII(s string) []string { return strings.FieldsFunc(s, isASCIISpace) }

// splitOnceASCIISpace splits at the first ASCII white space: ("key", " rest") or (s, "").
func splitOnceASCIISpace(s string) (string, string) {
	if i := strings.IndexFunc(s, isASCIISpace); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

// lines splits like Rust's str::lines: on "\n", dropping one trailing "\r" per line and the
// empty piece after a final newline.
func lines(text string) []string {
	if text == "" {
		return nil
	}
	out := strings.Split(text, "\n")
	if out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	for i, l := range out {
		out[i] = strings.TrimSuffix(l, "\r")
	}
	return out
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseU64 parses a decimal unsigned integer with nothing around it but white space; what
// names the field in the error.
func parseU64(format, what, text string) (uint64, error) {
	t := strings.TrimSpace(text)
	if t == "" || !allDigits(t) {
		return 0, newParseError(format, what+" is not a non-negative integer", text)
	}
	v, err := strconv.ParseUint(t, 10, 64)
	if err != nil {
		return 0, newParseError(format, what+" is too large", text)
	}
	return v, nil
}

// reasonOf is the reason of a *ParseError (every parser returns only those).
func reasonOf(err error) string {
	if pe, ok := err.(*ParseError); ok {
		return pe.Reason
	}
	return err.Error()
}

// Saturating arithmetic, as the Rust code uses throughout.

func satSub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

func satAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return ^uint64(0)
}

func satMul(a, b uint64) uint64 {
	if a == 0 || b == 0 {
		return 0
	}
	if p := a * b; p/b == a {
		return p
	}
	return ^uint64(0)
}

func satAdd32(a, b uint32) uint32 {
	if s := a + b; s >= a {
		return s
	}
	return ^uint32(0)
}

func satSub32(a, b uint32) uint32 {
	if a < b {
		return 0
	}
	return a - b
}

func satMul32(a, b uint32) uint32 {
	p := uint64(a) * uint64(b)
	if p > uint64(^uint32(0)) {
		return ^uint32(0)
	}
	return uint32(p)
}

// f64ToU32 converts as Rust's `x as u32` does: truncating toward zero, NaN and negatives to
// 0, and values beyond the range to u32::MAX (Go leaves those conversions undefined).
func f64ToU32(x float64) uint32 {
	switch {
	case x != x || x <= 0:
		return 0
	case x >= 4294967295:
		return ^uint32(0)
	default:
		return uint32(x)
	}
}

func clamp32(v, lo, hi uint32) uint32 {
	return max(lo, min(v, hi))
}
