package serve

import (
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"
)

// cookieName is the cookie that carries the token after a ?token= visit.
const cookieName = "ralph_token"

// authorize lets the request through when no token is configured, or when
// it carries the token: an Authorization: Bearer header, a ?token= query
// (answered with the cookie and a redirect to the same URL without it),
// or the cookie. Otherwise it answers 401 and returns false. The token is
// compared in constant time and never written in a response.
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
		http.SetCookie(w, &http.Cookie{Name: cookieName, Value: want, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		q.Del("token")
		u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
		http.Redirect(w, r, u.String(), http.StatusSeeOther)
		return false
	}
	if c, err := r.Cookie(cookieName); err == nil && same(c.Value, want) {
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
