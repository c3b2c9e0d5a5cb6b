package progress

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// maxSlug bounds the length of a derived id, in runes, before any "-2"
// suffix.
const maxSlug = 48

var phaseNumber = regexp.MustCompile(`(?i)^phase\s+(\d+)\b`)

// assignIDs gives every item its id: "phase-<N>" for a "Phase N: …"
// heading, otherwise the slug of the text; a repeated id gets "-2", "-3", …
// in file order. Checking a box does not change its text, so it does not
// change any id.
func assignIDs(items []Item) {
	seen := map[string]int{}
	for i := range items {
		base := ""
		if items[i].Phase {
			if m := phaseNumber.FindStringSubmatch(items[i].Title); m != nil {
				n, _ := strconv.Atoi(m[1])
				base = "phase-" + strconv.Itoa(n)
			}
		}
		if base == "" {
			base = slug(items[i].Title)
		}
		id := base
		for seen[id] > 0 {
			seen[base]++
			id = base + "-" + strconv.Itoa(seen[base])
		}
		seen[id] = 1
		items[i].ID = id
	}
}

// slug lowercases text and joins its runs of letters and digits with "-",
// dropping markdown punctuation: "Add `--dry-run` to **build**" →
// "add-dry-run-to-build". An empty result becomes "task".
func slug(text string) string {
	var b strings.Builder
	n := 0
	dash := false
	for _, r := range text {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if dash && b.Len() > 0 {
				if n+1 >= maxSlug {
					break
				}
				b.WriteByte('-')
				n++
			}
			if n >= maxSlug {
				break
			}
			b.WriteRune(unicode.ToLower(r))
			n++
			dash = false
			continue
		}
		if r == '\'' || r == '’' {
			continue // "don't" → "dont"
		}
		dash = true
	}
	if b.Len() == 0 {
		return "task"
	}
	return b.String()
}
