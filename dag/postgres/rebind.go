package postgres

import (
	"strconv"
	"strings"
)

// rebind turns a query of package dag's graph rules, written in SQLite's
// dialect, into PostgreSQL's:
//
//   - parameters: "?NNN" becomes "$NNN"; a bare "?" is numbered as SQLite
//     numbers it, one more than the largest number so far;
//   - "INDEXED BY name" (SQLite's index hint) goes: PostgreSQL plans by
//     its statistics;
//   - "INSERT OR FAIL INTO" is PostgreSQL's plain INSERT (a failing row
//     fails the statement either way);
//   - "CROSS JOIN … ON" (SQLite's hint to keep the join order) is a plain
//     JOIN;
//   - json_array is json_build_array.
//
// String literals ('…') are copied as they are. The rules' queries use
// nothing else of SQLite's own; the conformance suite runs every one.
func rebind(q string) string {
	var b strings.Builder
	b.Grow(len(q) + 16)
	highest := 0
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == '\'':
			j := i + 1
			for j < len(q) {
				if q[j] == '\'' {
					if j+1 < len(q) && q[j+1] == '\'' {
						j += 2
						continue
					}
					break
				}
				j++
			}
			b.WriteString(q[i:min(j+1, len(q))])
			i = j + 1
			continue
		case c == '?':
			j := i + 1
			for j < len(q) && q[j] >= '0' && q[j] <= '9' {
				j++
			}
			n := highest + 1
			if j > i+1 {
				n, _ = strconv.Atoi(q[i+1 : j])
			}
			highest = max(highest, n)
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			i = j
			continue
		case isWordStart(q, i):
			if w, n := keyword(q[i:]); n > 0 {
				b.WriteString(w)
				i += n
				continue
			}
		}
		b.WriteByte(c)
		i++
	}
	return b.String()
}

// isWordStart reports whether a word may start at q[i].
func isWordStart(q string, i int) bool {
	return i == 0 || !isWordByte(q[i-1])
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// keyword returns the replacement of the SQLite phrase s starts with, and
// the phrase's length; n is 0 when s starts with none.
func keyword(s string) (repl string, n int) {
	switch {
	case hasWord(s, "INDEXED BY"):
		// Drop the hint and the index name after it.
		j := len("INDEXED BY")
		for j < len(s) && s[j] == ' ' {
			j++
		}
		for j < len(s) && isWordByte(s[j]) {
			j++
		}
		return "", j
	case hasWord(s, "INSERT OR FAIL INTO"):
		return "INSERT INTO", len("INSERT OR FAIL INTO")
	case hasWord(s, "CROSS JOIN"):
		return "JOIN", len("CROSS JOIN")
	case strings.HasPrefix(s, "json_array("):
		return "json_build_array(", len("json_array(")
	}
	return "", 0
}

// hasWord reports whether s starts with the phrase w, followed by a
// non-word byte or the end.
func hasWord(s, w string) bool {
	return strings.HasPrefix(s, w) && (len(s) == len(w) || !isWordByte(s[len(w)]))
}
