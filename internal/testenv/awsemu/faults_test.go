package awsemu

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// TestLaunchTemplatesAndNodegroupFaultsEmulated checks the launch-template
// emulation against the EC2 API reference's rules (CreateLaunchTemplate,
// DescribeLaunchTemplates, DeleteLaunchTemplate: unique names, the
// metadata options' ranges, the NotFound codes), CreateNodegroup's
// launch-template rules (EKS API reference, CreateNodegroup: no diskSize
// or remoteAccess with a launch template; the template must exist), and
// the injected faults (FailNext; SetNodegroupFault's three statuses).
func TestLaunchTemplatesAndNodegroupFaultsEmulated(t *testing.T) {
	e := start(t, Options{Regions: []string{regionA}})
	ctx := t.Context()
	c := cfg(t, e, regionA)
	c.Retryer = func() aws.Retryer { return aws.NopRetryer{} }
	ec := ec2.NewFromConfig(c)
	ek := eks.NewFromConfig(c)

	data := &ec2types.RequestLaunchTemplateData{MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
		HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired, HttpPutResponseHopLimit: aws.Int32(1),
	}}
	tags := []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: []ec2types.Tag{{Key: aws.String("owner"), Value: aws.String("t")}}}}
	out, err := ec.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("lt-one"), LaunchTemplateData: data, TagSpecifications: tags})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.LaunchTemplate.LaunchTemplateId)
	if _, err := ec.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("lt-one"), LaunchTemplateData: data}); apiErrorCode(err) != "InvalidLaunchTemplateName.AlreadyExistsException" {
		t.Errorf("second template of one name: %v", err)
	}
	bad := &ec2types.RequestLaunchTemplateData{MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{HttpPutResponseHopLimit: aws.Int32(65)}}
	if _, err := ec.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("lt-two"), LaunchTemplateData: bad}); apiErrorCode(err) != "InvalidParameterValue" {
		t.Errorf("hop limit 65: %v, want InvalidParameterValue (1-64)", err)
	}
	d, err := ec.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{{Name: aws.String("tag:owner"), Values: []string{"t"}}}})
	if err != nil || len(d.LaunchTemplates) != 1 || aws.ToString(d.LaunchTemplates[0].LaunchTemplateId) != id || aws.ToInt64(d.LaunchTemplates[0].DefaultVersionNumber) != 1 {
		t.Errorf("describe by tag: %+v %v", d, err)
	}
	if d, err := ec.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{{Name: aws.String("tag:owner"), Values: []string{"x"}}}}); err != nil || len(d.LaunchTemplates) != 0 {
		t.Errorf("describe by another tag: %+v %v", d, err)
	}
	if _, err := ec.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{"lt-0000000000000000"}}); apiErrorCode(err) != "InvalidLaunchTemplateId.NotFound" {
		t.Errorf("describe an unknown id: %v", err)
	}

	// CreateNodegroup with the template.
	if _, err := ek.CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String("c"), RoleArn: aws.String("arn:aws:iam::000000000000:role/r"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: []string{"subnet-1"}}}); err != nil {
		t.Fatal(err)
	}
	ng := func(name string, lt *ekstypes.LaunchTemplateSpecification, disk *int32) error {
		_, err := ek.CreateNodegroup(ctx, &eks.CreateNodegroupInput{ClusterName: aws.String("c"), NodegroupName: aws.String(name),
			NodeRole: aws.String("arn:aws:iam::000000000000:role/n"), Subnets: []string{"subnet-1"}, InstanceTypes: []string{"t3.medium"},
			LaunchTemplate: lt, DiskSize: disk, ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: aws.Int32(1), MaxSize: aws.Int32(1), DesiredSize: aws.Int32(1)}})
		return err
	}
	spec := &ekstypes.LaunchTemplateSpecification{Id: aws.String(id), Version: aws.String("1")}
	if err := ng("disk", spec, aws.Int32(40)); apiErrorCode(err) != "InvalidParameterException" {
		t.Errorf("diskSize with a launch template: %v, want InvalidParameterException", err)
	}
	if err := ng("ghost", &ekstypes.LaunchTemplateSpecification{Id: aws.String("lt-0000000000000000")}, nil); apiErrorCode(err) != "InvalidParameterException" {
		t.Errorf("an unknown launch template: %v, want InvalidParameterException", err)
	}

	e.SetNodegroupFault("broken", NodegroupFault{Status: "CREATE_FAILED", Code: "AsgInstanceLaunchFailures", Message: "no capacity"})
	if err := ng("broken", spec, nil); err != nil {
		t.Fatal(err)
	}
	status := func(name string) (ekstypes.NodegroupStatus, string) {
		t.Helper()
		d, err := ek.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String("c"), NodegroupName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		code := ""
		if d.Nodegroup.Health != nil && len(d.Nodegroup.Health.Issues) > 0 {
			code = string(d.Nodegroup.Health.Issues[0].Code)
		}
		return d.Nodegroup.Status, code
	}
	if s, code := status("broken"); s != ekstypes.NodegroupStatusCreateFailed || code != "AsgInstanceLaunchFailures" {
		t.Errorf("CREATE_FAILED fault: %s %s", s, code)
	}
	if err := ng("fine", spec, nil); err != nil {
		t.Fatal(err)
	}
	e.SetNodegroupFault("fine", NodegroupFault{Status: "DEGRADED", Code: "InstanceLimitExceeded", Message: "quota"})
	if s, code := status("fine"); s != ekstypes.NodegroupStatusDegraded || code != "InstanceLimitExceeded" {
		t.Errorf("DEGRADED fault: %s %s", s, code)
	}
	e.SetNodegroupFault("fine", NodegroupFault{Status: "DELETE_FAILED", Code: "Ec2SecurityGroupDeletionFailure", Message: "DependencyViolation"})
	del, err := ek.DeleteNodegroup(ctx, &eks.DeleteNodegroupInput{ClusterName: aws.String("c"), NodegroupName: aws.String("fine")})
	if err != nil || del.Nodegroup.Status != ekstypes.NodegroupStatusDeleting {
		t.Fatalf("DeleteNodegroup under DELETE_FAILED: %+v %v, want accepted, DELETING", del, err)
	}
	if s, code := status("fine"); s != ekstypes.NodegroupStatusDeleteFailed || code != "Ec2SecurityGroupDeletionFailure" {
		t.Errorf("DELETE_FAILED fault: %s %s", s, code)
	}
	e.SetNodegroupFault("fine", NodegroupFault{})
	if _, err := ek.DeleteNodegroup(ctx, &eks.DeleteNodegroupInput{ClusterName: aws.String("c"), NodegroupName: aws.String("fine")}); err != nil {
		t.Fatal(err)
	}
	if _, err := ek.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String("c"), NodegroupName: aws.String("fine")}); apiErrorCode(err) != "ResourceNotFoundException" {
		t.Errorf("after the fault is cleared, delete deletes: %v", err)
	}

	// FailNext: exactly n answers, then served; counted.
	e.FailNext("DescribeCluster", "ThrottlingException", 2)
	for i := range 2 {
		_, err := ek.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("c")})
		if apiErrorCode(err) != "ThrottlingException" || !retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err).Bool() {
			t.Errorf("attempt %d: %v, want a ThrottlingException the SDK takes as a throttle", i+1, err)
		}
	}
	if _, err := ek.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("c")}); err != nil {
		t.Errorf("third attempt: %v", err)
	}
	if n := e.Failed("DescribeCluster"); n != 2 {
		t.Errorf("Failed = %d, want 2", n)
	}

	if _, err := ec.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(id)}); err != nil {
		t.Fatal(err)
	}
	if _, err := ec.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(id)}); apiErrorCode(err) != "InvalidLaunchTemplateId.NotFound" {
		t.Errorf("second delete: %v", err)
	}
}
