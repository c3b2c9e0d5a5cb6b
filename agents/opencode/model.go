package opencode

import (
	"encoding/json"
	"io"
	"path/filepath"

	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/safefile"
)

// DefaultModel is RunResult.Model when neither -m nor any config file
// ralph can read names the model: OpenCode then runs the model it used
// last, or its provider's first, and its stream does not say which.
const DefaultModel = "opencode-default"

// configFileLimit bounds how much of a config file is read for its model.
const configFileLimit = 1 << 20

// configNames are the names OpenCode reads a config file under, in a
// directory, weakest first.
var configNames = []string{"config.json", "opencode.json", "opencode.jsonc"}

// ConfiguredModel returns the model OpenCode runs when given no -m, as
// its configuration names it ("provider/model"): the "model" of the
// config sources OpenCode merges, strongest last — the global config
// ($XDG_CONFIG_HOME/opencode, else ~/.config/opencode), $OPENCODE_CONFIG,
// the project's (opencode.json or opencode.jsonc in dir, then in
// dir/.opencode) and $OPENCODE_CONFIG_CONTENT. "" when none does.
//
// It is a label for receipts, read before OpenCode starts: the project's
// files and OpenCode's own directories are the agent's to write, so every
// file is opened as package safefile opens them (no link followed, a FIFO
// refused without blocking), at most configFileLimit bytes, and a file
// that cannot be read or parsed names nothing. A remote
// organisation config (.well-known/opencode) is not fetched.
func ConfiguredModel(env []string, dir string) string {
	var model string
	take := func(data []byte) {
		if m := modelOf(data); m != "" {
			model = m
		}
	}
	global := filepath.Join(agentproc.Home(env), ".config", "opencode")
	if v := agentproc.Getenv(env, EnvXDGConfig); v != "" && filepath.IsAbs(v) {
		global = filepath.Join(v, "opencode")
	}
	for _, name := range configNames {
		take(readLimited(global, name))
	}
	if p := agentproc.Getenv(env, "OPENCODE_CONFIG"); p != "" && filepath.IsAbs(p) {
		take(readLimited(filepath.Dir(p), filepath.Base(p)))
	}
	if dir != "" {
		for _, d := range []string{".", ".opencode"} {
			for _, name := range configNames[1:] {
				take(readLimited(dir, filepath.Join(d, name)))
			}
		}
	}
	take([]byte(agentproc.Getenv(env, EnvConfigContent)))
	return model
}

// readLimited reads name inside dir as package safefile opens files an
// agent can write: no link followed, a FIFO or device refused without
// blocking; nil when it cannot.
func readLimited(dir, name string) []byte {
	f, err := safefile.Open(dir, filepath.Join(dir, name))
	if err != nil {
		return nil
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, configFileLimit))
	if err != nil {
		return nil
	}
	return data
}

// modelOf returns the top-level "model" of a JSON or JSONC document; ""
// when it has none or is not one.
func modelOf(data []byte) string {
	if len(data) == 0 {
		return ""
	}
	var cfg struct {
		Model string `json:"model"`
	}
	if json.Unmarshal(stripJSONC(data), &cfg) != nil {
		return ""
	}
	return cfg.Model
}

// stripJSONC returns data with JSONC's comments (// and /* */) and
// trailing commas taken out, strings untouched: plain JSON.
func stripJSONC(data []byte) []byte {
	out := make([]byte, 0, len(data))
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case c == '"':
			j := i + 1
			for j < len(data) && data[j] != '"' {
				if data[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j, len(data)-1)
			out = append(out, data[i:j+1]...)
			i = j
		case c == '/' && i+1 < len(data) && data[i+1] == '/':
			for i < len(data) && data[i] != '\n' {
				i++
			}
			i--
		case c == '/' && i+1 < len(data) && data[i+1] == '*':
			i += 2
			for i+1 < len(data) && (data[i] != '*' || data[i+1] != '/') {
				i++
			}
			i++
		case c == ']' || c == '}':
			// A trailing comma: the last byte kept that is not space.
			k := len(out) - 1
			for k >= 0 && (out[k] == ' ' || out[k] == '\t' || out[k] == '\n' || out[k] == '\r') {
				k--
			}
			if k >= 0 && out[k] == ',' {
				out = append(out[:k], out[k+1:]...)
			}
			out = append(out, c)
		default:
			out = append(out, c)
		}
	}
	return out
}
