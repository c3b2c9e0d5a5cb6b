package progress

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// maxSlug bounds the length of a derived id, in runes, before any "-2"
// suffix; maxSlugBytes in bytes, so that with any suffix it stays within
// dag.MaxIDBytes (80) when imported: an id names git branches.
const (
	maxSlug      = 48
	maxSlugBytes = 64
)

// assignIDs gives every item its id: the explicit one of an
// "<!-- id: X -->" marker, else the one collectItems derived ("phase-<N>"
// for a "Phase N" heading, else the slug of the text); a repeated derived
// id gets "-2", "-3", … in file order. Checking a box does not change its
// text, so it does not change any id. An explicit id given twice is an
// error.
func assignIDs(items []Item) error {
	seen := make(map[string]int, len(items)) // id -> times handed out
	var explicit map[string]int              // explicit id -> its line
	for _, it := range items {
		if !it.explicit {
			continue
		}
		if explicit == nil {
			explicit = map[string]int{}
		}
		if line, dup := explicit[it.ID]; dup {
			return errorAt(it.Line, "id %q is already used on line %d", it.ID, line)
		}
		explicit[it.ID] = it.Line
		seen[it.ID] = 1
	}
	for i := range items {
		if items[i].explicit {
			continue
		}
		base := items[i].ID
		id := base
		for seen[id] > 0 {
			seen[base]++
			id = base + "-" + strconv.Itoa(seen[base])
		}
		seen[id] = 1
		items[i].ID = id
	}
	return nil
}

// slug lowercases text and joins its runs of letters and digits with "-",
// dropping markdown punctuation: "Add `--dry-run` to **build**" →
// "add-dry-run-to-build". An empty result becomes "task".
func slug(text string) string {
	var buf [4 * (maxSlug + 2)]byte // the loop stops at maxSlug+2 runes
	b := buf[:0]
	n := 0 // runes in b
	dash := false
	for _, r := range text {
		switch {
		case r < utf8.RuneSelf && ('a' <= r && r <= 'z' || '0' <= r && r <= '9'):
		case r < utf8.RuneSelf && 'A' <= r && r <= 'Z':
			r += 'a' - 'A'
		case r >= utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			r = unicode.ToLower(r)
		case r == '\'' || r == '’':
			continue // "don't" → "dont"
		default:
			dash = true
			continue
		}
		if dash && n > 0 {
			b = append(b, '-')
			n++
		}
		dash = false
		b = utf8.AppendRune(b, r)
		n++
		if n > maxSlug || len(b) > maxSlugBytes {
			break
		}
	}
	if n > maxSlug || len(b) > maxSlugBytes {
		// Keep maxSlug runes and maxSlugBytes bytes, cut at a word
		// boundary when one is not too far back.
		cut, runes, dashAt := 0, 0, -1
		for runes < maxSlug {
			_, size := utf8.DecodeRune(b[cut:])
			if cut+size > maxSlugBytes {
				break
			}
			if b[cut] == '-' && (runes >= maxSlug/2 || cut >= maxSlugBytes/2) {
				dashAt = cut
			}
			cut += size
			runes++
		}
		b = b[:cut]
		if dashAt >= 0 {
			b = b[:dashAt]
		}
	}
	if len(b) == 0 {
		return "task"
	}
	return string(b)
}
