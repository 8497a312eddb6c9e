package oai

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/rs/zerolog"

	"github.com/agentd/agentd/actors/hub"
)

// Error types OpenAI's API answers.
const (
	typeInvalidRequest = "invalid_request_error"
	typeRateLimit      = "requests"
	typeServer         = "server_error"
)

// apiError is OpenAI's error object; an empty param or code is sent as
// null, as OpenAI does.
type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// WriteError answers {"error": {"message", "type", "param", "code"}} with
// status; the type follows from the status as on OpenAI's API. param names
// the request field at fault, code is a stable word ("" for neither).
func WriteError(w http.ResponseWriter, status int, code, param, msg string) {
	typ := typeInvalidRequest
	switch {
	case status == http.StatusTooManyRequests:
		typ = typeRateLimit
	case status >= 500:
		typ = typeServer
	}
	writeJSON(w, status, struct {
		Error apiError `json:"error"`
	}{apiError{Message: msg, Type: typ, Param: nullable(param), Code: nullable(code)}})
}

// nativeCodes maps the native API's error kinds to the codes OpenAI sends
// for the same failure; other kinds are sent as they are.
var nativeCodes = map[string]string{
	"unauthorized": "invalid_api_key",
	"rate_limited": "rate_limit_exceeded",
	"bad_request":  "",
	"not_found":    "",
}

// WriteNativeError writes an error the shared front of httpapi (auth,
// limits, body bounds) words with a native kind, in OpenAI's shape.
func WriteNativeError(w http.ResponseWriter, status int, kind, msg string) {
	code, ok := nativeCodes[kind]
	if !ok {
		code = kind
	}
	WriteError(w, status, code, "", msg)
}

// WriteHubError maps the hub's errors to statuses in OpenAI's shape; an
// error the hub does not name is logged with the request's id and answered
// as a bare 500 naming that id, so nothing internal reaches the client.
func WriteHubError(w http.ResponseWriter, r *http.Request, err error) {
	if ClientGone(w, r, err) {
		return
	}
	var limited *hub.RateLimitedError
	var setting *hub.SettingError
	switch {
	case errors.Is(err, hub.ErrNotFound):
		WriteError(w, http.StatusNotFound, "", "", err.Error())
	case errors.Is(err, hub.ErrUnknownModel):
		// OpenAI's answer to a model it does not have.
		WriteError(w, http.StatusNotFound, "model_not_found", "model", err.Error())
	case errors.Is(err, hub.ErrStorageFull):
		WriteError(w, http.StatusRequestEntityTooLarge, "storage_full", "", err.Error())
	case errors.Is(err, hub.ErrInvalid) && errors.As(err, &setting):
		WriteError(w, http.StatusBadRequest, "invalid_value", settingParam(setting.Field), setting.Error())
	case errors.Is(err, hub.ErrInvalid):
		WriteError(w, http.StatusBadRequest, "", "", err.Error())
	case errors.Is(err, hub.ErrBusy), errors.Is(err, hub.ErrTenantBusy):
		w.Header().Set("Retry-After", "1")
		WriteError(w, http.StatusTooManyRequests, "busy", "", err.Error())
	case errors.As(err, &limited):
		w.Header().Set("Retry-After", strconv.Itoa(limited.Seconds()))
		WriteError(w, http.StatusTooManyRequests, "rate_limit_exceeded", "", err.Error())
	case errors.Is(err, hub.ErrLimit):
		WriteError(w, http.StatusTooManyRequests, "limit", "", err.Error())
	case errors.Is(err, hub.ErrNotPaused), errors.Is(err, hub.ErrNothingToAnswer), errors.Is(err, hub.ErrKeyInProgress):
		WriteError(w, http.StatusConflict, "conflict", "", err.Error())
	case errors.Is(err, hub.ErrKeyReused):
		WriteError(w, http.StatusUnprocessableEntity, "key_reused", "", err.Error())
	case errors.Is(err, hub.ErrStopping):
		WriteError(w, http.StatusServiceUnavailable, "unavailable", "", err.Error())
	case hub.StoreClosed(err):
		w.Header().Set("Retry-After", "1")
		WriteError(w, http.StatusServiceUnavailable, "unavailable", "", hub.ErrStopping.Error()) // the store's error is the operator's
	case errors.Is(err, hub.ErrMoved), errors.Is(err, hub.ErrUnavailable):
		w.Header().Set("Retry-After", "1")
		code, msg := "unavailable", err.Error()
		if errors.Is(err, hub.ErrMoved) {
			code, msg = "moved", hub.ErrMoved.Error() // the cause is in the session's log
		}
		WriteError(w, http.StatusServiceUnavailable, code, "", msg)
	case errors.Is(err, hub.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		WriteError(w, http.StatusGatewayTimeout, "timeout", "", err.Error())
	case errors.Is(err, hub.ErrFailed):
		WriteError(w, http.StatusInternalServerError, "internal", "", hub.ErrFailed.Error()) // the panic is in the log
	case hub.StoreUnavailable(err):
		LogStoreUnavailable(r, err)
		w.Header().Set("Retry-After", "1")
		WriteError(w, http.StatusServiceUnavailable, "unavailable", "", hub.ErrStoreUnavailable.Error())
	default:
		zerolog.Ctx(r.Context()).Error().Err(err).Str("method", r.Method).Str("path", r.URL.Path).Msg("internal error answered 500")
		WriteError(w, http.StatusInternalServerError, "internal", "", "internal error; the operator's log has it under request id "+w.Header().Get("X-Request-Id"))
	}
}

// LogStoreUnavailable logs the store's error that a request answered as
// hub.ErrStoreUnavailable: the cause is the operator's.
func LogStoreUnavailable(r *http.Request, err error) {
	zerolog.Ctx(r.Context()).Warn().Err(err).Str("method", r.Method).Str("path", r.URL.Path).Msg("store unavailable answered 503")
}

// settingParam is the request field that carries a chat setting: the
// same name, but for the compaction threshold (context_management).
func settingParam(field string) string {
	if field == "compact_threshold" {
		return "context_management"
	}
	return field
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// StatusClientGone is recorded (span, logs) for a request whose client left
// before its answer; nginx's "client closed request", never read by a
// client.
const StatusClientGone = 499

// ClientGone reports whether err says r's client went away (a turn it left
// waiting in the queue, a read it gave up), and then records it as
// StatusClientGone with a debug line: nothing failed here, and no one reads
// the answer. Both surfaces' errors take this path first.
func ClientGone(w http.ResponseWriter, r *http.Request, err error) bool {
	if !errors.Is(err, context.Canceled) || r.Context().Err() == nil {
		return false
	}
	zerolog.Ctx(r.Context()).Debug().Err(err).Str("method", r.Method).Str("path", clip(r.URL.Path, 200)).Msg("client went away before its answer")
	w.WriteHeader(StatusClientGone)
	return true
}
