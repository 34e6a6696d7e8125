// Optional private networking: a VNet whose app subnet is delegated to Flex
// Consumption, and private endpoints (with their DNS zones) for the blob and queue services.
param vnetName string
param location string
param tags object = {}
param storageAccountId string
param privateEndpointName string

resource vnet 'Microsoft.Network/virtualNetworks@2024-05-01' = {
  name: vnetName
  location: location
  tags: tags
  properties: {
    addressSpace: {
      addressPrefixes: [
        '10.0.0.0/16'
      ]
    }
    subnets: [
      {
        name: 'app'
        properties: {
          addressPrefix: '10.0.1.0/24'
          delegations: [
            {
              name: 'flex-consumption'
              properties: {
                serviceName: 'Microsoft.App/environments'
              }
            }
          ]
        }
      }
      {
        name: 'private-endpoints'
        properties: {
          addressPrefix: '10.0.2.0/24'
          privateEndpointNetworkPolicies: 'Disabled'
        }
      }
    ]
  }
}

// The app reaches storage only privately: blobs (checkpoints, run records, the host's
// state) and queues (the run queue and the host's queue triggers).
var storageServices = [
  'blob'
  'queue'
]

resource dnsZones 'Microsoft.Network/privateDnsZones@2020-06-01' = [
  for service in storageServices: {
    name: 'privatelink.${service}.${environment().suffixes.storage}'
    location: 'global'
    tags: tags
  }
]

resource dnsLinks 'Microsoft.Network/privateDnsZones/virtualNetworkLinks@2020-06-01' = [
  for (service, i) in storageServices: {
    parent: dnsZones[i]
    name: '${vnetName}-link'
    location: 'global'
    properties: {
      registrationEnabled: false
      virtualNetwork: {
        id: vnet.id
      }
    }
  }
]

resource privateEndpoints 'Microsoft.Network/privateEndpoints@2024-05-01' = [
  for service in storageServices: {
    name: '${privateEndpointName}-${service}'
    location: location
    tags: tags
    properties: {
      subnet: {
        id: vnet.properties.subnets[1].id
      }
      privateLinkServiceConnections: [
        {
          name: service
          properties: {
            privateLinkServiceId: storageAccountId
            groupIds: [
              service
            ]
          }
        }
      ]
    }
  }
]

resource dnsGroups 'Microsoft.Network/privateEndpoints/privateDnsZoneGroups@2024-05-01' = [
  for (service, i) in storageServices: {
    parent: privateEndpoints[i]
    name: 'default'
    properties: {
      privateDnsZoneConfigs: [
        {
          name: service
          properties: {
            privateDnsZoneId: dnsZones[i].id
          }
        }
      ]
    }
  }
]

output appSubnetId string = vnet.properties.subnets[0].id
