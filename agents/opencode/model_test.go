package opencode

import (
	"os"
	"path/filepath"
	"testing"
)

// TestConfiguredModel: the model OpenCode's merged config names, the
// strongest source last; a link out of the project is not followed.
func TestConfiguredModel(t *testing.T) {
	write := func(t *testing.T, path, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	jsonc := "{\n  // the team's model\n  \"model\": \"anthropic/claude-sonnet-4-5\", /* not \"x/y\" */\n  \"share\": \"disabled\",\n}\n"
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, home, dir string) []string // env beyond HOME
		want  string
	}{
		{"nothing names one", func(*testing.T, string, string) []string { return nil }, ""},
		{"global", func(t *testing.T, home, _ string) []string {
			write(t, filepath.Join(home, ".config", "opencode", "opencode.json"), `{"model":"openai/gpt-5"}`)
			return nil
		}, "openai/gpt-5"},
		{"XDG_CONFIG_HOME's, and a project's JSONC over it", func(t *testing.T, home, dir string) []string {
			write(t, filepath.Join(home, "xdg", "opencode", "opencode.json"), `{"model":"openai/gpt-5"}`)
			write(t, filepath.Join(dir, "opencode.jsonc"), jsonc)
			return []string{"XDG_CONFIG_HOME=" + filepath.Join(home, "xdg")}
		}, "anthropic/claude-sonnet-4-5"},
		{"OPENCODE_CONFIG over the global, under the project's .opencode", func(t *testing.T, home, dir string) []string {
			write(t, filepath.Join(home, ".config", "opencode", "config.json"), `{"model":"a/global"}`)
			write(t, filepath.Join(home, "mine.json"), `{"model":"b/custom"}`)
			write(t, filepath.Join(dir, ".opencode", "opencode.json"), `{"model":"c/project"}`)
			return []string{"OPENCODE_CONFIG=" + filepath.Join(home, "mine.json")}
		}, "c/project"},
		{"OPENCODE_CONFIG_CONTENT last; a config without a model names nothing", func(t *testing.T, home, dir string) []string {
			write(t, filepath.Join(dir, "opencode.json"), `{"model":"c/project"}`)
			return []string{EnvConfigContent + `={"model":"d/inline"}`}
		}, "d/inline"},
		{"a broken or empty file names nothing", func(t *testing.T, home, dir string) []string {
			write(t, filepath.Join(home, ".config", "opencode", "opencode.json"), `{"model":"a/global"}`)
			write(t, filepath.Join(dir, "opencode.json"), `{"model":`)
			write(t, filepath.Join(dir, "opencode.jsonc"), `{"share":"disabled"}`)
			return []string{EnvConfigContent + `={"permission":{}}`}
		}, "a/global"},
		{"a FIFO an agent planted does not hang the runner", func(t *testing.T, home, dir string) []string {
			write(t, filepath.Join(home, ".config", "opencode", "opencode.json"), `{"model":"a/global"}`)
			if err := mkfifo(filepath.Join(dir, "opencode.json")); err != nil {
				t.Fatal(err)
			}
			return nil
		}, "a/global"},
		{"a link in the project, even to a file inside it, is not followed", func(t *testing.T, home, dir string) []string {
			write(t, filepath.Join(dir, "notes.json"), `{"model":"evil/inside"}`)
			if err := os.Symlink("notes.json", filepath.Join(dir, "opencode.jsonc")); err != nil {
				t.Fatal(err)
			}
			return nil
		}, ""},
		{"a link out of the project is not followed", func(t *testing.T, home, dir string) []string {
			write(t, filepath.Join(home, "outside.json"), `{"model":"evil/outside"}`)
			if err := os.Symlink(filepath.Join(home, "outside.json"), filepath.Join(dir, "opencode.json")); err != nil {
				t.Fatal(err)
			}
			return nil
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home, dir := t.TempDir(), t.TempDir()
			env := append([]string{"HOME=" + home}, tc.setup(t, home, dir)...)
			if got := ConfiguredModel(env, dir); got != tc.want {
				t.Errorf("ConfiguredModel = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestStripJSONC(t *testing.T) {
	for in, want := range map[string]string{
		`{"a": "//not a comment", "b": "/*nor this*/"}`: `{"a": "//not a comment", "b": "/*nor this*/"}`,
		"{\"a\": 1, // c\n}":                            "{\"a\": 1 \n}",
		`{"a": [1, 2,], /* x */ "b": "\"q\"",}`:         `{"a": [1, 2],  "b": "\"q\""}`,
		`{"a": "unterminated`:                           `{"a": "unterminated`,
	} {
		if got := string(stripJSONC([]byte(in))); got != want {
			t.Errorf("stripJSONC(%q) = %q, want %q", in, got, want)
		}
	}
}
