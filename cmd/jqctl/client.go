package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// client talks to ingest's HTTP API.
type client struct {
	server string
	http   *http.Client
	// watch follows streams (no overall timeout); namespace is the
	// context's namespace, if it names one.
	watch     *http.Client
	namespace string
	// err is why no client could be built from jqctl's config.
	err error
	// seqFile keeps the last write's sequence (see readyourwrites.go).
	seqFile string
	// retry, when set, replaces the default retry policy (retry.go);
	// newKey, the generator of Idempotency-Keys.
	retry  *retryPolicy
	newKey func() string
}

// apiError is API.md's error body.
type apiError struct {
	Status int
	Errors []struct {
		Object  string `json:"object"`
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"errors"`
}

func (e *apiError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "server answered %d", e.Status)
	for _, fe := range e.Errors {
		b.WriteString("\n  ")
		if fe.Object != "" {
			b.WriteString(fe.Object + ": ")
		}
		if fe.Field != "" {
			b.WriteString(fe.Field + ": ")
		}
		b.WriteString(fe.Message)
	}
	return b.String()
}

// statusError is a metav1.Status answer (the /apis/ paths).
type statusError struct {
	Code    int
	Message string
	// Fields are the fields its causes name.
	Fields []string
}

// kubeStatus is the part of a metav1.Status jqctl reads.
type kubeStatus struct {
	Kind, Message string
	Details       *struct {
		Causes []struct{ Field string }
	}
}

func (st *kubeStatus) error(code int) *statusError {
	e := &statusError{Code: code, Message: st.Message}
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			e.Fields = append(e.Fields, c.Field)
		}
	}
	return e
}

func (e *statusError) Error() string { return fmt.Sprintf("server answered %d: %s", e.Code, e.Message) }

// notFound says whether err is the server's 404, in either error shape.
func notFound(err error) bool {
	var ae *apiError
	var se *statusError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound || errors.As(err, &se) && se.Code == http.StatusNotFound
}

func (c *client) do(method, path, contentType string, body []byte, out any) error {
	return c.doCtx(context.Background(), method, path, contentType, body, out)
}

// doCtx is do that gives up, retries included, when ctx ends.
func (c *client) doCtx(ctx context.Context, method, path, contentType string, body []byte, out any) error {
	if c.err != nil {
		return c.err
	}
	minSeq := uint64(0)
	if method == http.MethodGet {
		minSeq = c.lastSeq()
	}
	newKey := c.newKey
	if newKey == nil {
		newKey = randomKey
	}
	// One key for every try of this request, however many sends.
	key := requestKey(method, path, body, newKey)
	err := c.send(ctx, method, path, contentType, body, key, minSeq, out)
	if minSeq > 0 && staleSeq(err) {
		// The server's stream ends before the write jqctl remembers: it
		// is another server now. Forget it and ask again.
		if err := c.forgetSeq(); err != nil {
			return err
		}
		return c.send(ctx, method, path, contentType, body, key, 0, out)
	}
	return err
}

// send makes a request, tried again while the server cannot serve it for
// now (retry.go); key, if set, is its Idempotency-Key; minSeq > 0 asks a
// query to wait for the projection to reach it.
func (c *client) send(ctx context.Context, method, path, contentType string, body []byte, key string, minSeq uint64, out any) error {
	p, err := c.retryPolicy()
	if err != nil {
		return err
	}
	var data []byte
	status, tries, err := p.withRetries(ctx, func() (int, http.Header, error) {
		code, h, d, err := c.try(ctx, method, path, contentType, body, key, minSeq)
		data = d
		return code, h, err
	})
	gaveUp := ""
	if tries > 1 {
		gaveUp = fmt.Sprintf(" (%d tries)", tries)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w (is the server at %s running?)%s", method, path, err, c.server, gaveUp)
	}
	if status >= 400 {
		if tries > 1 {
			return fmt.Errorf("%w%s", answerError(status, data), gaveUp)
		}
		return answerError(status, data)
	}
	if method != http.MethodGet {
		if err := c.noteSeq(answerSeq(data)); err != nil {
			return fmt.Errorf("remember the write's sequence in %s: %w", c.seqFile, err)
		}
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (c *client) retryPolicy() (retryPolicy, error) {
	if c.retry != nil {
		return *c.retry, nil
	}
	return defaultRetryPolicy()
}

// try sends the request once and reads the answer; err is a try that got
// no complete answer.
func (c *client) try(ctx context.Context, method, path, contentType string, body []byte, key string, minSeq uint64) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.server, "/")+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if minSeq > 0 {
		req.Header.Set(headerMinSeq, strconv.FormatUint(minSeq, 10))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp.Header, data, nil
}

// answerError is the error of an answer with status >= 400, in either of
// the server's error shapes.
func answerError(status int, data []byte) error {
	var st kubeStatus
	if json.Unmarshal(data, &st) == nil && st.Kind == "Status" {
		// A Kubernetes-style API's metav1.Status (everything under /apis/).
		return st.error(status)
	}
	e := &apiError{Status: status}
	if json.Unmarshal(data, e) != nil || len(e.Errors) == 0 {
		return fmt.Errorf("server answered %d: %s", status, strings.TrimSpace(string(data)))
	}
	return e
}

// stream opens a streaming GET (a watch); the caller closes the body.
func (c *client) stream(ctx context.Context, path string) (io.ReadCloser, error) {
	if c.err != nil {
		return nil, c.err
	}
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimSuffix(c.server, "/")+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.watch.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w (is the server at %s running?)", path, err, c.server)
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var st kubeStatus
		if json.Unmarshal(data, &st) == nil && st.Kind == "Status" {
			return nil, st.error(resp.StatusCode)
		}
		e := &apiError{Status: resp.StatusCode}
		if json.Unmarshal(data, e) != nil || len(e.Errors) == 0 {
			return nil, fmt.Errorf("server answered %d: %s", resp.StatusCode, strings.TrimSpace(string(data)))
		}
		return nil, e
	}
	return resp.Body, nil
}

// readInput reads -f FILE, or standard input for "-".
func readInput(cmd *cobra.Command, path string) ([]byte, error) {
	if path == "" {
		return nil, fmt.Errorf("-f FILE is required (use - for standard input)")
	}
	if path == "-" {
		return io.ReadAll(cmd.InOrStdin())
	}
	return os.ReadFile(path)
}

// defaultServer is the --server flag's default: JQ_SERVER, else the
// context's server (see newClient), else http://127.0.0.1:8080.
func defaultServer() string {
	if s := os.Getenv("JQ_SERVER"); s != "" {
		return s
	}
	return defaultServerURL
}
