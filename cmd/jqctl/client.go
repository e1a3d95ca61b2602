package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// client talks to ingest's HTTP API.
type client struct {
	server string
	http   *http.Client
	// err is why no client could be built from jqctl's config.
	err error
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

func (c *client) do(method, path, contentType string, body []byte, out any) error {
	if c.err != nil {
		return c.err
	}
	req, err := http.NewRequest(method, strings.TrimSuffix(c.server, "/")+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w (is the server at %s running?)", method, path, err, c.server)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 400 {
		e := &apiError{Status: resp.StatusCode}
		if json.Unmarshal(data, e) != nil || len(e.Errors) == 0 {
			return fmt.Errorf("server answered %d: %s", resp.StatusCode, strings.TrimSpace(string(data)))
		}
		return e
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
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
