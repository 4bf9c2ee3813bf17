package testbed

import (
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"time"
)

// Control sends a request to testbed name's control socket.
func control(name string, req request) (*response, error) {
	return controlWithin(name, req, 5*time.Second)
}

// controlWithin is control with the time the answer may take.
func controlWithin(name string, req request, timeout time.Duration) (*response, error) {
	c, err := net.DialTimeout("unix", filepath.Join(stateDir(name), "ctl.sock"), 2*time.Second)
	if err != nil {
		return nil, fmt.Errorf("testbed %s is not running: %w", name, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if err := json.NewEncoder(c).Encode(req); err != nil {
		return nil, err
	}
	var resp response
	if err := json.NewDecoder(c).Decode(&resp); err != nil {
		return nil, fmt.Errorf("testbed %s: reading control answer: %w", name, err)
	}
	if resp.Error != "" { // the answer is the error
		return &resp, fmt.Errorf("testbed %s: %s", name, resp.Error)
	}
	return &resp, nil
}

// ReadStats reads testbed name's counters, run by any process.
func ReadStats(name string) (*Stats, error) {
	resp, err := control(name, request{Op: "stats"})
	if err != nil {
		return nil, err
	}
	return resp.Stats, nil
}
