package agentproctest

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Golden compares got with the golden file at path, or writes got there
// when update is set (each package's -update flag).
func Golden(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", path, diff)
	}
}

// DecodeGolden is the golden text of a decoded stream: each event as a
// JSON line, then the line "# "+caption+":", then the classified result
// as a JSON line (HTML characters unescaped, for reading).
func DecodeGolden[E any](t testing.TB, events []E, caption string, result any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, ev := range events {
		if err := enc.Encode(ev); err != nil {
			t.Fatal(err)
		}
	}
	buf.WriteString("# " + caption + ":\n")
	if err := enc.Encode(result); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
