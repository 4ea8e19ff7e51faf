package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent/imagestore"
	"github.com/agent-sandbox/agent-sandbox/internal/router/access"
)

// Audience is the audience of the tokens the controller sends the node agent: a token stolen
// from the agent opens nothing else, and no other token of the controller opens the agent.
const Audience = "agent-sandbox-node-agent"

// Paths of the agent's API (POST, JSON in and out).
const (
	CheckpointPath = "/v1/checkpoint"
	DeletePath     = "/v1/delete"
)

// ErrorBody is the answer of a failed call.
type ErrorBody struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Handler serves the agent's API to the one user allowed: every call carries a bearer token that
// the TokenReview API says is Allowed's, for Audience.
func Handler(a *Agent, reviewer access.TokenReviewer, allowed string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+CheckpointPath, func(w http.ResponseWriter, r *http.Request) {
		var req CheckpointRequest
		if !decode(w, r, &req) {
			return
		}
		res, err := a.Save(r.Context(), req)
		answer(w, res, err)
	})
	mux.HandleFunc("POST "+DeletePath, func(w http.ResponseWriter, r *http.Request) {
		var req DeleteRequest
		if !decode(w, r, &req) {
			return
		}
		res, err := a.Delete(req.SandboxUID)
		answer(w, res, err)
	})
	return authenticated(mux, reviewer, allowed)
}

func authenticated(next http.Handler, reviewer access.TokenReviewer, allowed string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			writeError(w, http.StatusUnauthorized, "Unauthenticated", "a bearer token of audience "+Audience+" is required")
			return
		}
		user, err := reviewer.Review(r.Context(), token)
		switch {
		case err != nil:
			writeError(w, http.StatusServiceUnavailable, "ReviewFailed", err.Error())
		case user == nil:
			writeError(w, http.StatusUnauthorized, "Unauthenticated", "the token is not valid for audience "+Audience)
		case user.Username != allowed:
			writeError(w, http.StatusForbidden, "Forbidden", user.Username+" may not call the node agent")
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "BadRequest", err.Error())
		return false
	}
	return true
}

func answer(w http.ResponseWriter, v any, err error) {
	var e *imagestore.Error
	switch {
	case errors.As(err, &e):
		writeError(w, http.StatusUnprocessableEntity, e.Reason, e.Message)
	case errors.Is(err, context.Canceled):
		writeError(w, http.StatusServiceUnavailable, imagestore.ReasonFailed, err.Error())
	case err != nil:
		writeError(w, http.StatusInternalServerError, imagestore.ReasonFailed, err.Error())
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
}

func writeError(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(ErrorBody{Reason: reason, Message: msg})
}
