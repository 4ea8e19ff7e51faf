package fakeapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/rest"
)

// ReviewAPI is an API server that answers TokenReviews (tokens maps a token to its user; any
// other token is not authenticated) and SubjectAccessReviews (get on the non-resource URL
// /metrics for the metricsReaders alone, as a binding to agent-sandbox-metrics-reader would),
// for tests of the metrics filters. It returns its client config and a count of the reviews
// asked.
func ReviewAPI(t testing.TB, tokens map[string]string, metricsReaders ...string) (*rest.Config, *atomic.Int32) {
	t.Helper()
	var reviews atomic.Int32
	answer := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /apis/authentication.k8s.io/v1/tokenreviews", func(w http.ResponseWriter, r *http.Request) {
		reviews.Add(1)
		var tr authnv1.TokenReview
		if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		user := tokens[tr.Spec.Token]
		tr.Status = authnv1.TokenReviewStatus{Authenticated: user != "", User: authnv1.UserInfo{Username: user}}
		answer(w, &tr)
	})
	mux.HandleFunc("POST /apis/authorization.k8s.io/v1/subjectaccessreviews", func(w http.ResponseWriter, r *http.Request) {
		reviews.Add(1)
		var sar authzv1.SubjectAccessReview
		if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		nr := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = slices.Contains(metricsReaders, sar.Spec.User) && nr != nil && nr.Path == "/metrics" && nr.Verb == "get"
		answer(w, &sar)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}, &reviews
}
