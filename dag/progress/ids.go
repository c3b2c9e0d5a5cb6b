package progress

import (
	"regexp"
	"slices"
	"strconv"
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
	var b []rune
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
	}
	if len(b) > maxSlug {
		b = b[:maxSlug]
		// Cut at a word boundary when one is not too far back.
		if i := slices.Index(reverse(b), '-'); i >= 0 && i < maxSlug/2 {
			b = b[:len(b)-i-1]
		}
	}
	if len(b) == 0 {
		return "task"
	}
	return string(b)
}

func reverse(r []rune) []rune {
	out := slices.Clone(r)
	slices.Reverse(out)
	return out
}
