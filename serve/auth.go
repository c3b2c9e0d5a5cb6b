package serve

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// cookieName names the cookie that lets a browser in after a ?token=
// visit: "ralph_token_<port>", since browsers send a host's cookies to
// every port of it, and two ralph serves on one host must not overwrite
// each other's.
func cookieName(r *http.Request) string {
	_, port, err := net.SplitHostPort(r.Host)
	if err != nil || port == "" || strings.Trim(port, "0123456789") != "" {
		return "ralph_token"
	}
	return "ralph_token_" + port
}

// cookieValue is what the cookie holds: not the token, which may serve
// elsewhere too, but a key derived from it, good for this view only.
func cookieValue(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("ralph serve cookie"))
	return hex.EncodeToString(m.Sum(nil))
}

// authorize lets the request through when no token is configured, or when
// it carries the token: an Authorization: Bearer header, a ?token= query
// (answered with the cookie and a redirect to the same URL without it),
// or the cookie. Otherwise it answers 401 and returns false. The token is
// compared in constant time and never written in a response (the cookie
// holds a key derived from it).
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) bool {
	want := s.cfg.Token
	if want == "" {
		return true
	}
	if a := r.Header.Get("Authorization"); a != "" {
		if scheme, tok, ok := strings.Cut(a, " "); ok && strings.EqualFold(scheme, "Bearer") && same(tok, want) {
			return true
		}
	}
	q := r.URL.Query()
	if q.Has("token") {
		if !same(q.Get("token"), want) {
			unauthorized(w)
			return false
		}
		http.SetCookie(w, &http.Cookie{Name: cookieName(r), Value: cookieValue(want), Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		q.Del("token")
		// One leading slash: "//host/x" would leave for another host.
		u := url.URL{Path: "/" + strings.TrimLeft(r.URL.Path, "/"), RawQuery: q.Encode()}
		http.Redirect(w, r, u.String(), http.StatusSeeOther)
		return false
	}
	if c, err := r.Cookie(cookieName(r)); err == nil && same(c.Value, cookieValue(want)) {
		return true
	}
	unauthorized(w)
	return false
}

func same(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="ralph serve"`)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	w.Write([]byte("ralph serve: this view needs its token (open the address once with ?token=<your token>, or send Authorization: Bearer <your token>)\n"))
}
