package exchange

import (
	"encoding/json"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// writeJSON answers with a Kubernetes-style JSON body.
func writeJSON(w http.ResponseWriter, code int, obj any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(obj)
}

// writeStatus answers with a metav1.Status, the error shape kubectl and
// client-go understand.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, message string) {
	writeJSON(w, code, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Code:     int32(code), //nolint:gosec // HTTP status codes fit in int32
		Reason:   reason,
		Message:  message,
	})
}

func writeInvalid(w http.ResponseWriter, kind, field, message string) {
	writeJSON(w, http.StatusUnprocessableEntity, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Code:     http.StatusUnprocessableEntity,
		Reason:   metav1.StatusReasonInvalid,
		Message:  kind + " is invalid: " + field + ": " + message,
		Details: &metav1.StatusDetails{Kind: kind, Causes: []metav1.StatusCause{{
			Type: metav1.CauseTypeFieldValueRequired, Message: message, Field: field,
		}}},
	})
}
