package progress

import (
	"strconv"
	"unicode"
)

// maxSlug bounds the length of a derived id, in runes, before any "-2"
// suffix.
const maxSlug = 48

// assignIDs gives every item its id: the explicit one of an
// "<!-- id: X -->" marker, else "phase-<N>" for a "Phase N" heading, else
// the slug of the text; a repeated derived id gets "-2", "-3", … in file
// order. Checking a box does not change its text, so it does not change any
// id. An explicit id given twice is an error.
func assignIDs(items []Item) error {
	seen := map[string]int{}     // id -> times handed out
	explicit := map[string]int{} // explicit id -> its line
	for _, it := range items {
		if it.explicitID == "" {
			continue
		}
		if line, dup := explicit[it.explicitID]; dup {
			return errorAt(it.Line, "id %q is already used on line %d", it.explicitID, line)
		}
		explicit[it.explicitID] = it.Line
		seen[it.explicitID] = 1
	}
	for i := range items {
		if id := items[i].explicitID; id != "" {
			items[i].ID = id
			continue
		}
		base := slug(items[i].Title)
		if items[i].phaseNum > 0 {
			base = "phase-" + strconv.Itoa(items[i].phaseNum)
		}
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
	b := make([]rune, 0, min(len(text), maxSlug+1))
	dash := false
	for _, r := range text {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if dash && len(b) > 0 {
				b = append(b, '-')
			}
			b = append(b, unicode.ToLower(r))
			dash = false
		case r == '\'' || r == '’':
			// "don't" → "dont"
		default:
			dash = true
		}
		if len(b) > maxSlug {
			break
		}
	}
	if len(b) > maxSlug {
		b = b[:maxSlug]
		// Cut at a word boundary when one is not too far back.
		if i := lastIndex(b, '-'); i >= maxSlug/2 {
			b = b[:i]
		}
	}
	if len(b) == 0 {
		return "task"
	}
	return string(b)
}

func lastIndex(rs []rune, r rune) int {
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i] == r {
			return i
		}
	}
	return -1
}
