package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/agentd/agentd/api"
)

// upload stores the files of a multipart body (field "file", one or more),
// streaming each straight to the attachment store.
func (s *Server) upload(w http.ResponseWriter, r *http.Request, tenant string) {
	if !bodyFits(w, r, s.cfg.Limits.MaxUploadBytes, writeError) {
		return
	}
	limitBody(w, r, s.cfg.HTTP.UploadTimeout.Duration)
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.Limits.MaxUploadBytes)
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "send the files as multipart/form-data in a field named \"file\": "+err.Error())
		return
	}
	var out []api.Attachment
	for {
		part, err := mr.NextPart()
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("upload over the limit of %d bytes", tooBig.Limit))
				return
			}
			if bodyTimedOut(err) {
				w.Header().Set("Connection", "close")
				writeError(w, http.StatusRequestTimeout, "timeout", "the upload did not arrive within http.upload_timeout")
				return
			}
			if err.Error() != "EOF" {
				writeError(w, http.StatusBadRequest, "bad_request", "multipart body: "+err.Error())
				return
			}
			break
		}
		if part.FormName() != "file" {
			continue
		}
		a, err := s.hub.Attach(r.Context(), tenant, part, part.FileName(), part.Header.Get("Content-Type"))
		if err != nil {
			writeHubError(w, r, err)
			return
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		writeError(w, http.StatusBadRequest, "bad_request", "no file part named \"file\" in the body")
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"attachments": out})
}
