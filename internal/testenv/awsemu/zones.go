package awsemu

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Availability zones, which kumo v0.33.1 does not describe at all
// (DescribeAvailabilityZones and DescribeInstanceTypeOfferings are not
// implemented), emulated as real AWS presents them:
//
//   - A zone has a name (us-east-1a) and an ID (use1-az4). Names map to
//     IDs differently in every account; the ID is the physical zone.
//   - EKS creates no control plane in some zone IDs and refuses a
//     CreateCluster whose subnets are there with
//     UnsupportedAvailabilityZoneException (EKS User Guide, "View Amazon EKS
//     networking requirements for VPC and subnets": use1-az3, usw1-az2,
//     cac1-az3; API reference, CreateCluster errors:
//     https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateCluster.html).
//   - Local and Wavelength zones are listed too (ZoneType local-zone,
//     wavelength-zone) and hold no EKS control plane.
//   - An instance type is offered in some zones only
//     (DescribeInstanceTypeOfferings with LocationType availability-zone:
//     https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceTypeOfferings.html).

// Zone is one availability zone of the emulated account.
type Zone struct {
	Name, ID string
	// Type is availability-zone (also when empty), local-zone or
	// wavelength-zone.
	Type string
	// NotOffered are instance types EC2 does not offer in the zone.
	NotOffered []string
}

// EKSUnsupportedZoneIDs are the zone IDs where EKS creates no control plane.
var EKSUnsupportedZoneIDs = []string{"use1-az3", "usw1-az2", "cac1-az3"}

// zoneState is the emulated zones per region and the zone of each subnet
// kiln created through the emulator.
type zoneState struct {
	mu      sync.Mutex
	zones   map[string][]Zone // region -> zones
	subnets map[string]string // subnet id -> zone name
}

// DefaultZones lays out region's zones as a real account may see them:
// three zones whose names map to IDs out of order, the first name on an
// ID EKS refuses where the region has one, and a local zone whose name
// sorts first.
func DefaultZones(region string) []Zone {
	abbrev := map[string]string{"us-east-1": "use1", "us-west-1": "usw1", "ca-central-1": "cac1", "us-west-2": "usw2", "eu-west-1": "euw1", "us-east-2": "use2"}[region]
	if abbrev == "" {
		abbrev = strings.ReplaceAll(region, "-", "")
	}
	ids := []string{abbrev + "-az4", abbrev + "-az1", abbrev + "-az2"}
	for _, bad := range EKSUnsupportedZoneIDs {
		if strings.HasPrefix(bad, abbrev+"-") {
			ids[0] = bad
		}
	}
	return []Zone{
		{Name: region + "-lcl-1a", ID: abbrev + "-lcl1-az1", Type: "local-zone"},
		{Name: region + "a", ID: ids[0]},
		{Name: region + "b", ID: ids[1]},
		{Name: region + "c", ID: ids[2]},
	}
}

// SetZones replaces the zones region shows (DescribeAvailabilityZones,
// DescribeInstanceTypeOfferings, and CreateCluster's zone check).
func (e *Emulator) SetZones(region string, zones []Zone) {
	e.az.mu.Lock()
	defer e.az.mu.Unlock()
	e.az.zones[region] = slices.Clone(zones)
}

func (z *zoneState) of(region string) []Zone {
	z.mu.Lock()
	defer z.mu.Unlock()
	if zs, ok := z.zones[region]; ok {
		return zs
	}
	zs := DefaultZones(region)
	z.zones[region] = zs
	return zs
}

// serveEC2 answers the EC2 actions kumo lacks and records the zone of each
// subnet created; false: kumo answers.
func (e *Emulator) serveEC2(w http.ResponseWriter, r *http.Request, b *backend, body []byte) bool {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return false
	}
	switch form.Get("Action") {
	case "DescribeAvailabilityZones":
		type item struct {
			ZoneName    string `xml:"zoneName"`
			ZoneState   string `xml:"zoneState"`
			RegionName  string `xml:"regionName"`
			ZoneID      string `xml:"zoneId"`
			ZoneType    string `xml:"zoneType"`
			OptIn       string `xml:"optInStatus"`
			BorderGroup string `xml:"networkBorderGroup"`
		}
		var items []item
		for _, z := range e.az.of(b.region) {
			t, opt := z.Type, "opt-in-not-required"
			if t == "" {
				t = "availability-zone"
			} else if t != "availability-zone" {
				opt = "opted-in"
			}
			items = append(items, item{z.Name, "available", b.region, z.ID, t, opt, b.region})
		}
		writeXML(w, http.StatusOK, struct {
			XMLName   xml.Name `xml:"DescribeAvailabilityZonesResponse"`
			RequestID string   `xml:"requestId"`
			Items     []item   `xml:"availabilityZoneInfo>item"`
		}{RequestID: newRequestID(), Items: items})
		return true
	case "DescribeInstanceTypeOfferings":
		var types []string
		for i := 1; ; i++ {
			if form.Get(fmt.Sprintf("Filter.%d.Name", i)) == "" {
				break
			}
			if form.Get(fmt.Sprintf("Filter.%d.Name", i)) != "instance-type" {
				continue
			}
			for j := 1; form.Get(fmt.Sprintf("Filter.%d.Value.%d", i, j)) != ""; j++ {
				types = append(types, form.Get(fmt.Sprintf("Filter.%d.Value.%d", i, j)))
			}
		}
		type item struct {
			InstanceType string `xml:"instanceType"`
			LocationType string `xml:"locationType"`
			Location     string `xml:"location"`
		}
		var items []item
		for _, z := range e.az.of(b.region) {
			for _, t := range types {
				if !slices.Contains(z.NotOffered, t) {
					items = append(items, item{t, "availability-zone", z.Name})
				}
			}
		}
		writeXML(w, http.StatusOK, struct {
			XMLName   xml.Name `xml:"DescribeInstanceTypeOfferingsResponse"`
			RequestID string   `xml:"requestId"`
			Items     []item   `xml:"instanceTypeOfferingSet>item"`
		}{RequestID: newRequestID(), Items: items})
		return true
	case "CreateSubnet":
		status, h, out, err := e.kumo(r, b, r.Method, r.URL.Path, body)
		if err != nil {
			writeAWSError(w, r, "ec2", http.StatusServiceUnavailable, ErrCodeServiceUnavailable, err.Error())
			return true
		}
		if m := subnetIDPattern.FindSubmatch(out); status == http.StatusOK && m != nil {
			e.az.mu.Lock()
			e.az.subnets[string(m[1])] = form.Get("AvailabilityZone")
			e.az.mu.Unlock()
		}
		copyAnswer(w, status, h, out)
		return true
	}
	return false
}

var subnetIDPattern = regexp.MustCompile(`<subnetId>([^<]+)</subnetId>`)

// refuseUnsupportedZones answers CreateCluster as EKS does when a subnet
// is in a zone that holds no EKS control plane; false when none is.
func (e *Emulator) refuseUnsupportedZones(w http.ResponseWriter, r *http.Request, b *backend, body []byte) bool {
	var req struct {
		Name               string `json:"name"`
		ResourcesVpcConfig struct {
			SubnetIDs []string `json:"subnetIds"`
		} `json:"resourcesVpcConfig"`
	}
	if json.Unmarshal(body, &req) != nil {
		return false
	}
	zones := e.az.of(b.region)
	e.az.mu.Lock()
	defer e.az.mu.Unlock()
	var bad string
	var good []string
	for _, z := range zones {
		ok := (z.Type == "" || z.Type == "availability-zone") && !slices.Contains(EKSUnsupportedZoneIDs, z.ID)
		if ok {
			good = append(good, z.Name)
		}
		for _, id := range req.ResourcesVpcConfig.SubnetIDs {
			if e.az.subnets[id] == z.Name && !ok && bad == "" {
				bad = z.Name
			}
		}
	}
	if bad == "" {
		return false
	}
	eksError(w, r, http.StatusBadRequest, "UnsupportedAvailabilityZoneException",
		"Cannot create cluster '%s' because %s, the targeted availability zone, does not currently have sufficient capacity to support the cluster. Retry and choose from these availability zones: %s", req.Name, bad, strings.Join(good, ", "))
	return true
}
