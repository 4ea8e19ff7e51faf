// Package hibernate is a client of the hibernate service of gVisor's containerd shim: its Checkpoint
// saves a runsc sandbox to an image, which containerd's own task API cannot (docs/snapshots.md).
package hibernate

import (
	"context"
	"fmt"
	"net"
	"path/filepath"

	"github.com/containerd/ttrpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// gVisor's shim serves, beside containerd's task API, a ttrpc service of its own when its
// config.toml says enable_hibernate_server = true: gvisor.task.TaskService on
// <runsc root>/<container id>_sandbox.sock (gvisor.dev/gvisor pkg/shim/v1/taskserver). Its
// Checkpoint runs `runsc checkpoint` on the shim's own runsc root, as containerd's task API
// cannot: the shim answers that one "not implemented". The messages are declared here from
// their wire form (the fields we set), so that the caller needs ttrpc and not gVisor's module.

const hibernateService = "gvisor.task.TaskService"

// hibernateMessages describes gvisor.task.CheckpointRequest (id = 1, image_path = 2,
// leave_running = 4, compression = 6) and the empty CheckpointResponse.
var hibernateMessages = func() protoreflect.FileDescriptor {
	field := func(name string, n int32, typ descriptorpb.FieldDescriptorProto_Type) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{
			Name: proto.String(name), Number: proto.Int32(n), JsonName: proto.String(name),
			Type: typ.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
		}
	}
	str, boolean := descriptorpb.FieldDescriptorProto_TYPE_STRING, descriptorpb.FieldDescriptorProto_TYPE_BOOL
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name: proto.String("nodeagent/hibernate/gvisor_task.proto"), Package: proto.String("gvisor.task"),
		Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("CheckpointRequest"), Field: []*descriptorpb.FieldDescriptorProto{
				field("id", 1, str), field("image_path", 2, str), field("leave_running", 4, boolean),
				field("compression", 6, str),
			}},
			{Name: proto.String("CheckpointResponse")},
		},
	}, nil)
	if err != nil {
		panic(err)
	}
	return fd
}()

// Socket is where the shim of container id serves gvisor.task.TaskService.
func Socket(runscRoot, id string) string {
	return filepath.Join(runscRoot, id+"_sandbox.sock")
}

// CheckpointOptions are the request's fields we set.
type CheckpointOptions struct {
	ImagePath   string
	Compression string // "" (runsc's default: none) or "flate-best-speed"
	// LeaveRunning keeps the sandbox running once saved (runsc checkpoint --leave-running): a
	// fork's parent carries on.
	LeaveRunning bool
}

// Checkpoint asks the shim of container id to save its sandbox into opts.ImagePath. The sandbox
// stops once saved unless opts.LeaveRunning; the call returns when runsc checkpoint has.
func Checkpoint(ctx context.Context, socket, id string, opts CheckpointOptions) error {
	conn, err := (&net.Dialer{}).DialContext(ctx, "unix", socket)
	if err != nil {
		return fmt.Errorf("dialling the shim's hibernate server: %w", err)
	}
	client := ttrpc.NewClient(conn)
	defer client.Close()
	msgs := hibernateMessages.Messages()
	req := dynamicpb.NewMessage(msgs.ByName("CheckpointRequest"))
	fields := req.Descriptor().Fields()
	req.Set(fields.ByName("id"), protoreflect.ValueOfString(id))
	req.Set(fields.ByName("image_path"), protoreflect.ValueOfString(opts.ImagePath))
	req.Set(fields.ByName("compression"), protoreflect.ValueOfString(opts.Compression))
	req.Set(fields.ByName("leave_running"), protoreflect.ValueOfBool(opts.LeaveRunning))
	resp := dynamicpb.NewMessage(msgs.ByName("CheckpointResponse"))
	if err := client.Call(ctx, hibernateService, "Checkpoint", req, resp); err != nil {
		return fmt.Errorf("checkpoint of %s: %w", id, err)
	}
	return nil
}
