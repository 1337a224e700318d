package forward_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/ansible-bridge/ansible-bridge/bridge/forward"
	"golang.org/x/crypto/ssh"
)

// A mux server answers MUX_C_OPEN_FWD with what Open returns: here a
// local forward without a connect port, which OpenSSH's master refuses
// before touching the connection.
func ExampleSet_Open() {
	var client *ssh.Client // the master's connection
	set := forward.NewSet(client, forward.Options{StreamLocalBindMask: 0o177})
	defer set.Close()

	_, err := set.Open(context.Background(), forward.Spec{
		Kind: forward.Local, ListenPort: 8080, ConnectHost: "intranet",
	})
	var fail *forward.Error
	switch {
	case errors.Is(err, forward.ErrMalformed):
		fmt.Println("drop the client")
	case errors.As(err, &fail):
		fmt.Println("MUX_S_FAILURE:", fail.Reason)
	case err == nil:
		fmt.Println("MUX_S_OK")
	}
	// Output: MUX_S_FAILURE: Invalid forwarding request
}
