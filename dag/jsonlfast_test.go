package dag

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var fastSeeds = []string{
	`{"id":"t1","title":"Task 1","description":"Generated task 1.","priority":0,"parent":null,"blocked_by":[],"status":"pending"}`,
	`{"id":"a","title":"First","description":"d","priority":1,"parent":null,"blocked_by":["b"],"status":"pending"}`,
	`{"id":"b","title":"Second","parent":""}`,
	`{ "id" : "c" , "title" : "x\"y\\z\/\b\f\n\r\t\u00e9\u2028" , "blocked_by" : [ "a" , "b" ] }`,
	`{"id":"d","title":"é 日本 🙂","priority":-12,"feature":"auth","status":"done"}`,
	`{"id":"e","title":"x","priority":null,"blocked_by":null}`,
	`{}`,
	`{"id":"f","title":"bad surrogate \ud800"}`,
	`{"id":"g","title":"float","priority":1.0}`,
	`{"id":"h","title":"exp","priority":1e2}`,
	`{"id":"i","title":"leading zero","priority":01}`,
	`{"id":"j","title":"twice","title":"again"}`,
	`{"ID":"k","title":"case"}`,
	`{"id":"l","title":"x"} {"id":"m"}`,
	`{"id":"n","title":"x","issue_type":"task","dependencies":[]}`,
	`{"id":"o","title":"big","priority":99999999999999999999}`,
	"{\"id\":\"p\",\"title\":\"bad utf8 \xff\"}",
	"{\"id\":\"q\",\"title\":\"ctl \x01\"}",
	`{"id":"r","title":"x","blocked_by":[null]}`,
	`{"id":"s","title":"x","status":null}`,
	`{"id":"t","title":"x",}`,
	`{"id":"u","title":"x","priority":-0}`,
	`{"id":"v","title":"\u0000 nul"}`,
	`{"id":"w","title":"x","blocked_by":["a",]}`,
	`{"id":"x","title":"x","check":"go test ./... && echo \"ok\"","check_by":"agent-1"}`,
	`{"id":"y","title":"x","check":"a","check":"b"}`,
}

// FuzzParseFast: whatever the fast reader accepts, encoding/json reads the
// same way (with DisallowUnknownFields, as parseLine uses it).
func FuzzParseFast(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		got, ok := parseFast(line)
		if !ok {
			return
		}
		var want jsonlTask
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&want); err != nil {
			t.Fatalf("parseFast accepted %q, encoding/json: %v", line, err)
		}
		if dec.More() {
			t.Fatalf("parseFast accepted %q, encoding/json sees more than one value", line)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("parseFast(%q) (-encoding/json +fast):\n%s", line, diff)
		}
	})
}

// TestParseFastTakesOwnLines: the fast reader does handle what ralph
// writes (else it would be no faster), and leaves the odd lines to
// encoding/json.
func TestParseFastTakesOwnLines(t *testing.T) {
	for i, s := range fastSeeds {
		_, ok := parseFast([]byte(s))
		if want := i < 7 || s == `{"id":"u","title":"x","priority":-0}` || s == `{"id":"v","title":"\u0000 nul"}` ||
			s == `{"id":"x","title":"x","check":"go test ./... && echo \"ok\"","check_by":"agent-1"}`; ok != want {
			t.Errorf("parseFast(%s): ok = %v, want %v", s, ok, want)
		}
	}
}
