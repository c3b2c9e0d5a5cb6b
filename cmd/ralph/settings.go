package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// addSessionEndHook adds a SessionEnd command hook running command to the
// Claude Code settings document data (empty: a new document). Everything
// already there is kept, in its order: other keys, other events' hooks,
// other SessionEnd entries. changed is false, and out nil, when an entry
// already runs command (or another ralph release hook): running it twice
// adds nothing. The result is indented with two spaces.
func addSessionEndHook(data []byte, command string) (out []byte, changed bool, err error) {
	root := &jsonObject{}
	if len(bytes.TrimSpace(data)) > 0 {
		v, err := decodeOrdered(data)
		if err != nil {
			return nil, false, err
		}
		obj, ok := v.(*jsonObject)
		if !ok {
			return nil, false, errors.New("the settings are not a JSON object")
		}
		root = obj
	}

	hooks := &jsonObject{}
	if v, ok := root.get("hooks"); ok {
		if hooks, ok = v.(*jsonObject); !ok {
			return nil, false, errors.New(`"hooks" is not an object`)
		}
	}
	var entries []any
	if v, ok := hooks.get("SessionEnd"); ok && v != nil {
		if entries, ok = v.([]any); !ok {
			return nil, false, errors.New(`"hooks.SessionEnd" is not a list`)
		}
	}
	if hasReleaseHook(entries, command) {
		return nil, false, nil
	}

	hook := &jsonObject{}
	hook.set("type", "command")
	hook.set("command", command)
	entry := &jsonObject{}
	entry.set("hooks", []any{hook})
	hooks.set("SessionEnd", append(entries, entry))
	root.set("hooks", hooks)

	var buf bytes.Buffer
	if err := encodeOrdered(&buf, root); err != nil {
		return nil, false, err
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, buf.Bytes(), "", "  "); err != nil {
		return nil, false, err
	}
	pretty.WriteByte('\n')
	return pretty.Bytes(), true, nil
}

// hasReleaseHook reports whether a SessionEnd entry already runs command or
// another `task release --agent "$RALPH_AGENT_ID"` (an older ralph's hook,
// or one the user adapted).
func hasReleaseHook(entries []any, command string) bool {
	for _, e := range entries {
		eo, ok := e.(*jsonObject)
		if !ok {
			continue
		}
		hs, _ := eo.get("hooks")
		list, _ := hs.([]any)
		for _, h := range list {
			ho, ok := h.(*jsonObject)
			if !ok {
				continue
			}
			cmd, _ := ho.get("command")
			s, _ := cmd.(string)
			if s == command || strings.Contains(s, `task release --agent "$RALPH_AGENT_ID"`) {
				return true
			}
		}
	}
	return false
}

// jsonObject is a JSON object that remembers its key order, so that a
// settings file ralph edits keeps the layout its owner gave it.
type jsonObject struct {
	keys []string
	vals map[string]any
}

func (o *jsonObject) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

func (o *jsonObject) set(k string, v any) {
	if o.vals == nil {
		o.vals = map[string]any{}
	}
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

// decodeOrdered decodes one JSON document into *jsonObject, []any,
// json.Number, string, bool and nil values.
func decodeOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, invalidJSON(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: more than one value")
	}
	return v, nil
}

func invalidJSON(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("invalid JSON: unexpected end of file")
	}
	return fmt.Errorf("invalid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := &jsonObject{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				obj.set(k, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return obj, nil
		case '[':
			list := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return list, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return tok, nil
	}
}

// encodeOrdered writes v as compact JSON, without HTML escaping (shell
// commands are full of & and >).
func encodeOrdered(buf *bytes.Buffer, v any) error {
	switch t := v.(type) {
	case *jsonObject:
		buf.WriteByte('{')
		for i, k := range t.keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := encodeOrdered(buf, k); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := encodeOrdered(buf, t.vals[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := encodeOrdered(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	default:
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(t); err != nil {
			return err
		}
		buf.Write(bytes.TrimRight(b.Bytes(), "\n"))
	}
	return nil
}
