package check

// Just enough of PromQL to read the series a query names: a lexer that skips strings, label
// matchers, ranges, Grafana variables, numbers, functions, aggregations and keywords, and
// keeps the other identifiers. No dependency on the Prometheus parser (a large module) for a
// check this narrow; an unknown function is reported rather than guessed at.

import (
	"fmt"
	"regexp"
	"strings"
)

func wordSet(words ...string) map[string]bool {
	set := make(map[string]bool, len(words))
	for _, w := range words {
		set[w] = true
	}
	return set
}

var (
	functions = wordSet("abs", "absent", "absent_over_time", "avg_over_time", "ceil", "changes",
		"clamp", "clamp_max", "clamp_min", "count_over_time", "delta", "deriv", "exp", "floor",
		"histogram_quantile", "idelta", "increase", "irate", "label_join", "label_replace",
		"last_over_time", "ln", "log2", "log10", "max_over_time", "min_over_time",
		"predict_linear", "quantile_over_time", "rate", "resets", "round", "scalar", "sort",
		"sort_desc", "sqrt", "stddev_over_time", "stdvar_over_time", "sum_over_time", "time",
		"timestamp", "vector")
	aggregations = wordSet("sum", "avg", "min", "max", "count", "group", "stddev", "stdvar",
		"topk", "bottomk", "quantile", "count_values", "limitk", "limit_ratio")
	// groupingKeywords take a parenthesised label list.
	groupingKeywords = wordSet("by", "without", "on", "ignoring", "group_left", "group_right")
	otherKeywords    = wordSet("and", "or", "unless", "bool", "offset", "atan2", "inf", "nan")

	histogramQuantileCall = regexp.MustCompile(`histogram_quantile\s*\(`)
	aggregationCall       = regexp.MustCompile(`(?i)\b(sum|avg|min|max|count|group|stddev|stdvar|topk|bottomk|quantile|count_values|limitk|limit_ratio)\s*(\(|by\b|without\b)`)
	grouping              = regexp.MustCompile(`(?i)\b(by|without)\s*\(([^)]*)\)`)
)

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isIdentChar(c byte) bool { return isIdentStart(c) || isDigit(c) }

// skipString returns the index after the string literal that starts at i.
func skipString(expr string, i int) (int, error) {
	quote := expr[i]
	for j := i + 1; j < len(expr); j++ {
		if expr[j] == '\\' && quote != '`' {
			j++
			continue
		}
		if expr[j] == quote {
			return j + 1, nil
		}
	}
	return len(expr), fmt.Errorf("a string opened at offset %d is not closed", i)
}

// skipGroup returns the index after the bracket that closes the one at i ('{', '[' or '('),
// skipping string literals and nested brackets of the same kind.
func skipGroup(expr string, i int) (int, error) {
	open := expr[i]
	closing := map[byte]byte{'{': '}', '[': ']', '(': ')'}[open]
	depth := 0
	for j := i; j < len(expr); {
		switch c := expr[j]; {
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(expr, j)
			if err != nil {
				return end, err
			}
			j = end
			continue
		case c == open:
			depth++
		case c == closing:
			depth--
			if depth == 0 {
				return j + 1, nil
			}
		}
		j++
	}
	return len(expr), fmt.Errorf("%q opened at offset %d is not closed", string(open), i)
}

// nextNonSpace returns the index of the first character at or after i that is not white space.
func nextNonSpace(expr string, i int) int {
	for i < len(expr) && strings.ContainsRune(" \t\r\n", rune(expr[i])) {
		i++
	}
	return i
}

// metricNames returns the series names a PromQL expression (with Grafana's $variables) names,
// in order; the error is for what the lexer cannot read, with the names found before it.
func metricNames(expr string) ([]string, error) {
	var names []string
	depth := 0 // open parentheses
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '(':
			depth++
			i++
		case c == ')':
			if depth--; depth < 0 {
				return names, fmt.Errorf("a ) at offset %d closes nothing", i)
			}
			i++
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(expr, i)
			if err != nil {
				return names, err
			}
			i = end
		case c == '{' || c == '[':
			end, err := skipGroup(expr, i)
			if err != nil {
				return names, err
			}
			i = end
		case c == '$': // a Grafana variable: $name, ${name}, ${name:format}
			i++
			if i < len(expr) && expr[i] == '{' {
				end, err := skipGroup(expr, i)
				if err != nil {
					return names, err
				}
				i = end
			} else {
				for i < len(expr) && isIdentChar(expr[i]) {
					i++
				}
			}
		case c == '#': // a comment, to the end of the line
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case isDigit(c) || (c == '.' && i+1 < len(expr) && isDigit(expr[i+1])):
			// a number or a duration: 0.99, 5m, 1e3, 0x1f
			for i < len(expr) && (isIdentChar(expr[i]) || expr[i] == '.') {
				i++
			}
		case isIdentStart(c):
			start := i
			for i < len(expr) && isIdentChar(expr[i]) {
				i++
			}
			word := expr[start:i]
			lower := strings.ToLower(word)
			next := nextNonSpace(expr, i)
			paren := next < len(expr) && expr[next] == '('
			switch {
			case groupingKeywords[lower]:
				if paren {
					end, err := skipGroup(expr, next)
					if err != nil {
						return names, err
					}
					i = end
				}
			case functions[lower] || aggregations[lower] || otherKeywords[lower]:
				// Their arguments are read as the loop goes on.
			case paren:
				return names, fmt.Errorf("%s( is not a PromQL function this check knows (deploy/check/promql.go)", word)
			default:
				names = append(names, word)
			}
		default:
			i++
		}
	}
	if depth > 0 {
		return names, fmt.Errorf("%d parenthesis(es) not closed", depth)
	}
	return names, nil
}

// histogramQuantileArgs returns the argument text of each histogram_quantile call.
func histogramQuantileArgs(expr string) []string {
	var calls []string
	for _, match := range histogramQuantileCall.FindAllStringIndex(expr, -1) {
		open := match[1] - 1
		end, err := skipGroup(expr, open)
		if err != nil {
			continue // metricNames reports the unclosed bracket
		}
		calls = append(calls, expr[open+1:end-1])
	}
	return calls
}

// aggregates says whether the expression aggregates (sum, avg, max, ...).
func aggregates(expr string) bool {
	return aggregationCall.MatchString(expr)
}

// groupingLabels returns the first grouping clause of the expression: "by" or "without" (""
// if none) and its labels.
func groupingLabels(expr string) (string, map[string]bool) {
	match := grouping.FindStringSubmatch(expr)
	if match == nil {
		return "", nil
	}
	labels := map[string]bool{}
	for _, label := range strings.Split(match[2], ",") {
		if label = strings.TrimSpace(label); label != "" {
			labels[label] = true
		}
	}
	return strings.ToLower(match[1]), labels
}
