package awsemu

// Network interfaces and security-group references: what kumo v0.33.1
// lacks for a VPC to be swept the way AWS requires.
//
// kumo has no CreateNetworkInterface or DeleteNetworkInterface (its
// DescribeNetworkInterfaces only reflects its instances), keeps only CIDR
// rules in security groups (a rule naming another group is dropped), and
// deletes a security group, a subnet or a VPC that still has dependents.
// The harness therefore keeps, per region:
//
//   - network interfaces (CreateNetworkInterface, DescribeNetworkInterfaces
//     with the filters vpc-id, subnet-id, status, group-id,
//     network-interface-id, attachment.instance-id, DeleteNetworkInterface),
//     each `available` until a test attaches it to an instance with
//     [Emulator.AttachNetworkInterface]; an attached one is `in-use` and
//     DeleteNetworkInterface refuses it (InvalidNetworkInterface.InUse) —
//     https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DeleteNetworkInterface.html;
//   - security group rules that reference another group
//     (AuthorizeSecurityGroupIngress/Egress with IpPermissions.N.Groups.M,
//     DescribeSecurityGroupRules, RevokeSecurityGroupIngress/Egress by
//     SecurityGroupRuleId.N or by IpPermissions.N.Groups.M, and
//     DescribeSecurityGroups with the filters ip-permission.group-id and
//     egress.ip-permission.group-id);
//
// and answers DependencyViolation as the API reference states:
// DeleteSecurityGroup while a network interface uses the group or another
// group's rule references it (API_DeleteSecurityGroup.html: "If you
// attempt to delete a security group that is associated with an instance
// or network interface, is referenced by another security group …, the
// operation fails with DependencyViolation"), DeleteSubnet while a network
// interface is in the subnet (API_DeleteSubnet.html: "You must terminate
// all running instances in the subnet before you can delete the subnet"),
// and DeleteVpc while the VPC has network interfaces or security groups
// other than "default" (API_DeleteVpc.html: "you must … delete all
// security groups associated with the VPC (except the default one)").
// CIDR rules stay kumo's.

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"sync"
)

type eni struct {
	ID, SubnetID, VpcID, Zone, Description string
	Groups                                 []string
	Status                                 string // available | in-use
	InstanceID, AttachmentID               string
	Tags                                   [][2]string
}

type sgRule struct {
	ID, GroupID      string
	Egress           bool
	Protocol         string
	FromPort, ToPort int
	RefGroup         string
}

type netStore struct {
	mu    sync.Mutex
	enis  map[string]map[string]*eni    // region -> id
	rules map[string]map[string]*sgRule // region -> id
}

func (s *netStore) region(r string) (map[string]*eni, map[string]*sgRule) {
	if s.enis == nil {
		s.enis, s.rules = map[string]map[string]*eni{}, map[string]map[string]*sgRule{}
	}
	if s.enis[r] == nil {
		s.enis[r], s.rules[r] = map[string]*eni{}, map[string]*sgRule{}
	}
	return s.enis[r], s.rules[r]
}

// AttachNetworkInterface marks network interface id of region in-use,
// attached to instanceID (an instance kiln did not create): it then never
// detaches by itself, as an interface of a running instance would not.
func (e *Emulator) AttachNetworkInterface(region, id, instanceID string) error {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	enis, _ := e.net.region(region)
	n := enis[id]
	if n == nil {
		return fmt.Errorf("awsemu: no network interface %s in %s", id, region)
	}
	n.Status, n.InstanceID, n.AttachmentID = "in-use", instanceID, "eni-attach-"+newRequestID()[:17]
	return nil
}

// DetachNetworkInterface makes network interface id of region available.
func (e *Emulator) DetachNetworkInterface(region, id string) error {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	enis, _ := e.net.region(region)
	n := enis[id]
	if n == nil {
		return fmt.Errorf("awsemu: no network interface %s in %s", id, region)
	}
	n.Status, n.InstanceID, n.AttachmentID = "available", "", ""
	return nil
}

func ec2Err(w http.ResponseWriter, r *http.Request, code, format string, args ...any) bool {
	writeAWSError(w, r, "ec2", http.StatusBadRequest, code, fmt.Sprintf(format, args...))
	return true
}

func ec2OK(w http.ResponseWriter, action string) bool {
	writeXML(w, http.StatusOK, struct {
		XMLName   xml.Name
		RequestID string `xml:"requestId"`
		Return    bool   `xml:"return"`
	}{XMLName: xml.Name{Local: action + "Response"}, RequestID: newRequestID(), Return: true})
	return true
}

// indexed returns form values PREFIX.1, PREFIX.2, … (SUFFIX appended).
func indexed(form url.Values, prefix, suffix string) []string {
	var out []string
	for i := 1; ; i++ {
		v, ok := form[fmt.Sprintf("%s.%d%s", prefix, i, suffix)]
		if !ok {
			return out
		}
		out = append(out, v[0])
	}
}

// filters returns the Filter.N.Name -> values of an EC2 query request.
func filters(form url.Values) map[string][]string {
	out := map[string][]string{}
	for i := 1; ; i++ {
		name := form.Get(fmt.Sprintf("Filter.%d.Name", i))
		if name == "" {
			return out
		}
		out[name] = append(out[name], indexed(form, fmt.Sprintf("Filter.%d.Value", i), "")...)
	}
}

type kumoSG struct {
	GroupID   string `xml:"groupId"`
	GroupName string `xml:"groupName"`
	Desc      string `xml:"groupDescription"`
	VpcID     string `xml:"vpcId"`
	OwnerID   string `xml:"ownerId"`
}

func (e *Emulator) kumoQuery(r *http.Request, b *backend, form url.Values, v any) error {
	form.Set("Version", "2016-11-15")
	status, _, out, err := e.kumo(r, b, http.MethodPost, "/", []byte(form.Encode()))
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("kumo %s: HTTP %d: %s", form.Get("Action"), status, out)
	}
	return xml.Unmarshal(out, v)
}

func (e *Emulator) kumoSGs(r *http.Request, b *backend) ([]kumoSG, error) {
	var doc struct {
		Items []kumoSG `xml:"securityGroupInfo>item"`
	}
	err := e.kumoQuery(r, b, url.Values{"Action": {"DescribeSecurityGroups"}}, &doc)
	return doc.Items, err
}

// serveNetwork answers the network-interface and security-group-reference
// actions kumo lacks and refuses deletions AWS refuses; false: kumo
// answers (zones.go may still intercept).
func (e *Emulator) serveNetwork(w http.ResponseWriter, r *http.Request, b *backend, body []byte) bool {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return false
	}
	action := form.Get("Action")
	switch action {
	case "CreateNetworkInterface", "DescribeNetworkInterfaces", "DeleteNetworkInterface",
		"AuthorizeSecurityGroupIngress", "AuthorizeSecurityGroupEgress",
		"RevokeSecurityGroupIngress", "RevokeSecurityGroupEgress",
		"DescribeSecurityGroupRules", "DescribeSecurityGroups",
		"DeleteSecurityGroup", "DeleteSubnet", "DeleteVpc":
	default:
		return false
	}
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	enis, rules := e.net.region(b.region)
	switch action {
	case "CreateNetworkInterface":
		subnet := form.Get("SubnetId")
		if subnet == "" {
			return ec2Err(w, r, "MissingParameter", "The request must contain the parameter SubnetId")
		}
		var doc struct {
			Items []struct {
				ID   string `xml:"subnetId"`
				Vpc  string `xml:"vpcId"`
				Zone string `xml:"availabilityZone"`
			} `xml:"subnetSet>item"`
		}
		if err := e.kumoQuery(r, b, url.Values{"Action": {"DescribeSubnets"}, "SubnetId.1": {subnet}}, &doc); err != nil {
			return ec2Err(w, r, ErrCodeServiceUnavailable, "%v", err)
		}
		i := slices.IndexFunc(doc.Items, func(s struct {
			ID   string `xml:"subnetId"`
			Vpc  string `xml:"vpcId"`
			Zone string `xml:"availabilityZone"`
		}) bool {
			return s.ID == subnet
		})
		if i < 0 {
			return ec2Err(w, r, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", subnet)
		}
		n := &eni{ID: "eni-" + newRequestID()[:17], SubnetID: subnet, VpcID: doc.Items[i].Vpc, Zone: doc.Items[i].Zone,
			Description: form.Get("Description"), Groups: indexed(form, "SecurityGroupId", ""), Status: "available"}
		keys := indexed(form, "TagSpecification.1.Tag", ".Key")
		vals := indexed(form, "TagSpecification.1.Tag", ".Value")
		for k := range keys {
			if k < len(vals) {
				n.Tags = append(n.Tags, [2]string{keys[k], vals[k]})
			}
		}
		enis[n.ID] = n
		writeXML(w, http.StatusOK, struct {
			XMLName   xml.Name `xml:"CreateNetworkInterfaceResponse"`
			RequestID string   `xml:"requestId"`
			ENI       xmlENI   `xml:"networkInterface"`
		}{RequestID: newRequestID(), ENI: n.xml()})
		return true
	case "DescribeNetworkInterfaces":
		ids := indexed(form, "NetworkInterfaceId", "")
		f := filters(form)
		for k := range f {
			switch k {
			case "vpc-id", "subnet-id", "status", "group-id", "network-interface-id", "attachment.instance-id":
			default:
				return ec2Err(w, r, "InvalidParameterValue", "The filter '%s' is invalid", k)
			}
		}
		var items []xmlENI
		for _, id := range sortedKeys(enis) {
			n := enis[id]
			if len(ids) > 0 && !slices.Contains(ids, id) {
				continue
			}
			ok := match(f["vpc-id"], n.VpcID) && match(f["subnet-id"], n.SubnetID) && match(f["status"], n.Status) &&
				match(f["network-interface-id"], n.ID) && match(f["attachment.instance-id"], n.InstanceID)
			if g := f["group-id"]; len(g) > 0 && !slices.ContainsFunc(n.Groups, func(x string) bool { return slices.Contains(g, x) }) {
				ok = false
			}
			if ok {
				items = append(items, n.xml())
			}
		}
		for _, id := range ids {
			if enis[id] == nil {
				return ec2Err(w, r, "InvalidNetworkInterfaceID.NotFound", "The networkInterface ID '%s' does not exist", id)
			}
		}
		writeXML(w, http.StatusOK, struct {
			XMLName   xml.Name `xml:"DescribeNetworkInterfacesResponse"`
			RequestID string   `xml:"requestId"`
			Items     []xmlENI `xml:"networkInterfaceSet>item"`
		}{RequestID: newRequestID(), Items: items})
		return true
	case "DeleteNetworkInterface":
		id := form.Get("NetworkInterfaceId")
		n := enis[id]
		switch {
		case n == nil:
			return ec2Err(w, r, "InvalidNetworkInterfaceID.NotFound", "The networkInterface ID '%s' does not exist", id)
		case n.Status == "in-use":
			return ec2Err(w, r, "InvalidNetworkInterface.InUse", "Interface: [%s] in use.", id)
		}
		delete(enis, id)
		return ec2OK(w, action)
	case "AuthorizeSecurityGroupIngress", "AuthorizeSecurityGroupEgress":
		perms := groupPerms(form, action == "AuthorizeSecurityGroupEgress")
		if len(perms) == 0 {
			return false
		}
		group := form.Get("GroupId")
		sgs, err := e.kumoSGs(r, b)
		if err != nil {
			return ec2Err(w, r, ErrCodeServiceUnavailable, "%v", err)
		}
		for _, p := range perms {
			for _, g := range []string{group, p.RefGroup} {
				if !slices.ContainsFunc(sgs, func(s kumoSG) bool { return s.GroupID == g }) {
					return ec2Err(w, r, "InvalidGroup.NotFound", "The security group '%s' does not exist", g)
				}
			}
			for _, x := range rules {
				if x.GroupID == group && x.Egress == p.Egress && x.Protocol == p.Protocol && x.FromPort == p.FromPort && x.ToPort == p.ToPort && x.RefGroup == p.RefGroup {
					return ec2Err(w, r, "InvalidPermission.Duplicate", "the specified rule \"peer: %s, ALL, ALLOW\" already exists", p.RefGroup)
				}
			}
		}
		for _, p := range perms {
			p.GroupID, p.ID = group, "sgr-"+newRequestID()[:17]
			rules[p.ID] = p
		}
		return ec2OK(w, action)
	case "RevokeSecurityGroupIngress", "RevokeSecurityGroupEgress":
		egress := action == "RevokeSecurityGroupEgress"
		group := form.Get("GroupId")
		ids := indexed(form, "SecurityGroupRuleId", "")
		perms := groupPerms(form, egress)
		if len(ids) == 0 && len(perms) == 0 {
			return false
		}
		for _, id := range ids {
			x := rules[id]
			if x == nil || x.GroupID != group || x.Egress != egress {
				return ec2Err(w, r, "InvalidSecurityGroupRuleId.NotFound", "The security group rule ID '%s' does not exist in group %s", id, group)
			}
		}
		for _, id := range ids {
			delete(rules, id)
		}
		for _, p := range perms {
			found := false
			for id, x := range rules {
				if x.GroupID == group && x.Egress == egress && x.Protocol == p.Protocol && x.FromPort == p.FromPort && x.ToPort == p.ToPort && x.RefGroup == p.RefGroup {
					delete(rules, id)
					found = true
				}
			}
			if !found {
				return ec2Err(w, r, "InvalidPermission.NotFound", "The specified rule does not exist in this security group.")
			}
		}
		return ec2OK(w, action)
	case "DescribeSecurityGroupRules":
		f := filters(form)
		for k := range f {
			if k != "group-id" {
				return ec2Err(w, r, "InvalidParameterValue", "The filter '%s' is invalid", k)
			}
		}
		ids := indexed(form, "SecurityGroupRuleId", "")
		type ref struct {
			GroupID string `xml:"groupId"`
		}
		type item struct {
			ID       string `xml:"securityGroupRuleId"`
			GroupID  string `xml:"groupId"`
			Egress   bool   `xml:"isEgress"`
			Protocol string `xml:"ipProtocol"`
			From     int    `xml:"fromPort"`
			To       int    `xml:"toPort"`
			Ref      ref    `xml:"referencedGroupInfo"`
		}
		var items []item
		for _, id := range sortedKeys(rules) {
			x := rules[id]
			if (len(ids) == 0 || slices.Contains(ids, id)) && match(f["group-id"], x.GroupID) {
				items = append(items, item{x.ID, x.GroupID, x.Egress, x.Protocol, x.FromPort, x.ToPort, ref{x.RefGroup}})
			}
		}
		writeXML(w, http.StatusOK, struct {
			XMLName   xml.Name `xml:"DescribeSecurityGroupRulesResponse"`
			RequestID string   `xml:"requestId"`
			Items     []item   `xml:"securityGroupRuleSet>item"`
		}{RequestID: newRequestID(), Items: items})
		return true
	case "DescribeSecurityGroups":
		f := filters(form)
		in, eg := f["ip-permission.group-id"], f["egress.ip-permission.group-id"]
		if len(in) == 0 && len(eg) == 0 {
			return false
		}
		sgs, err := e.kumoSGs(r, b)
		if err != nil {
			return ec2Err(w, r, ErrCodeServiceUnavailable, "%v", err)
		}
		var items []kumoSG
		for _, s := range sgs {
			for _, x := range rules {
				if x.GroupID == s.GroupID && (!x.Egress && slices.Contains(in, x.RefGroup) || x.Egress && slices.Contains(eg, x.RefGroup)) {
					items = append(items, s)
					break
				}
			}
		}
		writeXML(w, http.StatusOK, struct {
			XMLName   xml.Name `xml:"DescribeSecurityGroupsResponse"`
			RequestID string   `xml:"requestId"`
			Items     []kumoSG `xml:"securityGroupInfo>item"`
		}{RequestID: newRequestID(), Items: items})
		return true
	case "DeleteSecurityGroup":
		group := form.Get("GroupId")
		for _, id := range sortedKeys(enis) {
			if slices.Contains(enis[id].Groups, group) {
				return ec2Err(w, r, "DependencyViolation", "resource %s has a dependent object", group)
			}
		}
		for _, x := range rules {
			if x.RefGroup == group && x.GroupID != group {
				return ec2Err(w, r, "DependencyViolation", "resource %s has a dependent object", group)
			}
		}
		status, h, out, err := e.kumo(r, b, r.Method, r.URL.Path, body)
		if err != nil {
			return ec2Err(w, r, ErrCodeServiceUnavailable, "%v", err)
		}
		if status == http.StatusOK {
			for id, x := range rules {
				if x.GroupID == group {
					delete(rules, id)
				}
			}
		}
		copyAnswer(w, status, h, out)
		return true
	case "DeleteSubnet":
		subnet := form.Get("SubnetId")
		for _, n := range enis {
			if n.SubnetID == subnet {
				return ec2Err(w, r, "DependencyViolation", "The subnet '%s' has dependencies and cannot be deleted.", subnet)
			}
		}
		return false
	case "DeleteVpc":
		vpc := form.Get("VpcId")
		for _, n := range enis {
			if n.VpcID == vpc {
				return ec2Err(w, r, "DependencyViolation", "The vpc '%s' has dependencies and cannot be deleted.", vpc)
			}
		}
		sgs, err := e.kumoSGs(r, b)
		if err != nil {
			return ec2Err(w, r, ErrCodeServiceUnavailable, "%v", err)
		}
		for _, s := range sgs {
			if s.VpcID == vpc && s.GroupName != "default" {
				return ec2Err(w, r, "DependencyViolation", "The vpc '%s' has dependencies and cannot be deleted.", vpc)
			}
		}
		return false
	}
	return false
}

// groupPerms reads the group-referencing rules of an Authorize/Revoke
// request (IpPermissions.N.Groups.M.GroupId).
func groupPerms(form url.Values, egress bool) []*sgRule {
	var out []*sgRule
	for i := 1; form.Get(fmt.Sprintf("IpPermissions.%d.IpProtocol", i)) != ""; i++ {
		p := fmt.Sprintf("IpPermissions.%d.", i)
		from, _ := strconv.Atoi(form.Get(p + "FromPort"))
		to, _ := strconv.Atoi(form.Get(p + "ToPort"))
		if form.Get(p+"FromPort") == "" {
			from, to = -1, -1
		}
		for _, g := range indexed(form, p+"Groups", ".GroupId") {
			out = append(out, &sgRule{Egress: egress, Protocol: form.Get(p + "IpProtocol"), FromPort: from, ToPort: to, RefGroup: g})
		}
	}
	return out
}

func match(want []string, v string) bool { return len(want) == 0 || slices.Contains(want, v) }

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

type xmlENI struct {
	ID          string `xml:"networkInterfaceId"`
	SubnetID    string `xml:"subnetId"`
	VpcID       string `xml:"vpcId"`
	Zone        string `xml:"availabilityZone"`
	Description string `xml:"description"`
	Status      string `xml:"status"`
	Type        string `xml:"interfaceType"`
	Groups      []struct {
		ID string `xml:"groupId"`
	} `xml:"groupSet>item"`
	Attachment *struct {
		ID         string `xml:"attachmentId"`
		InstanceID string `xml:"instanceId"`
		Status     string `xml:"status"`
	} `xml:"attachment,omitempty"`
	Tags []struct {
		Key   string `xml:"key"`
		Value string `xml:"value"`
	} `xml:"tagSet>item"`
}

func (n *eni) xml() xmlENI {
	x := xmlENI{ID: n.ID, SubnetID: n.SubnetID, VpcID: n.VpcID, Zone: n.Zone, Description: n.Description, Status: n.Status, Type: "interface"}
	for _, g := range n.Groups {
		x.Groups = append(x.Groups, struct {
			ID string `xml:"groupId"`
		}{g})
	}
	if n.InstanceID != "" {
		x.Attachment = &struct {
			ID         string `xml:"attachmentId"`
			InstanceID string `xml:"instanceId"`
			Status     string `xml:"status"`
		}{n.AttachmentID, n.InstanceID, "attached"}
	}
	for _, t := range n.Tags {
		x.Tags = append(x.Tags, struct {
			Key   string `xml:"key"`
			Value string `xml:"value"`
		}{t[0], t[1]})
	}
	return x
}
