package testbed_test

import (
	"fmt"
	"net"

	"github.com/doxlab/doxlab/testbed"
)

// A testbed with the client's access link shaped as Table II's DSL
// profile: a program runs in a host with ip netns exec, and Go code opens
// sockets inside a host with Run (needs root; compiled, not run, here).
func Example() {
	tb, err := testbed.Start(testbed.Spec{Name: "example", Profile: "dsl"})
	if err != nil {
		panic(err)
	}
	defer tb.Close()

	// A program inside the client host.
	out, _ := tb.Command("client", "ping", "-c1", tb.IPs["server"]).CombinedOutput()
	fmt.Printf("%s", out)

	// A socket opened inside the server host, used from anywhere.
	var ln net.Listener
	if err := tb.Run("server", func() (err error) {
		ln, err = net.Listen("tcp", tb.IPs["server"]+":8080")
		return err
	}); err != nil {
		panic(err)
	}
	defer ln.Close()

	// Switch the client's link to 4G while the testbed runs.
	p, _ := testbed.LookupProfile("4g")
	if err := tb.SetProfile("client", p); err != nil {
		panic(err)
	}
}
