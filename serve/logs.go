package serve

import (
	"bytes"
	"hash/fnv"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ralph-dev/ralph/safefile"
)

// validName reports whether name is a plain file or directory name of the
// log directory: letters, digits, '.', '_' and '-', not starting with a
// dot. Nothing else can name a session or a raw stream.
func validName(name string) bool {
	if name == "" || name[0] == '.' || len(name) > 255 {
		return false
	}
	for _, c := range []byte(name) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// logs serves /logs/<session>/<file>: a raw stream, event log or other
// regular file of a session's log directory, as plain text. The path is
// checked on its escaped form, segment by segment (so %2f, %2e%2e, a
// backslash or a NUL cannot hide a separator or a parent), and the file
// is opened through package safefile from the project root: a symbolic
// link anywhere on the way — .ralph/logs itself, the session directory,
// the file — is refused, even one that stays inside, so no link swapped
// in during a request can make it serve a file from elsewhere. Anything
// else is 404.
func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/logs/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 2 {
		http.NotFound(w, r)
		return
	}
	for i, p := range parts {
		u, err := url.PathUnescape(p)
		if err != nil || !validName(u) {
			http.NotFound(w, r)
			return
		}
		parts[i] = u
	}
	f, err := safefile.Open(s.base(), filepath.Join(s.cfg.LogDir, parts[0], parts[1]))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	http.ServeContent(w, r, "", fi.ModTime(), f)
}

// index serves the page.
func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	s.serveAsset(w, r, "index.html")
}

// asset serves /assets/<name> from the embedded files.
func (s *Server) asset(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Path
	if !validName(name) || name == "index.html" {
		http.NotFound(w, r)
		return
	}
	s.serveAsset(w, r, name)
}

// serveAsset serves an embedded file with no-cache and an ETag (the
// file's hash), so a new ralph's page is never mixed with an old one's.
func (s *Server) serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	data, err := fs.ReadFile(s.assets, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	ctype := mime.TypeByExtension(path.Ext(name))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("ETag", etag(data))
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(data))
}

func etag(data []byte) string {
	h := fnv.New64a()
	h.Write(data)
	return `"` + strconv.FormatUint(h.Sum64(), 36) + `"`
}

// base is the trusted directory the log directory is reached from: the
// project root (Config.Root), or the log directory itself.
func (s *Server) base() string {
	return logBase(s.cfg.Root, s.cfg.LogDir)
}

// logBase is Server.base for a root and a log directory.
func logBase(root, logDir string) string {
	if root == "" {
		return logDir
	}
	return safefile.Within(root, logDir, logDir)
}
