// Optional Azure OpenAI account and model deployment for WORKFLOW=chat-agents. Keys are
// off: the function calls it as its managed identity (Cognitive Services OpenAI User).
param name string
param location string
param tags object = {}
param deploymentName string
param modelName string
param modelVersion string
@description('Thousands of tokens per minute for the deployment.')
param capacity int
param identityPrincipalId string
@description('Object ID of the deploying user; empty to skip.')
param userPrincipalId string = ''

var cognitiveServicesOpenAIUser = '5e0bd9bd-7b93-4f28-af87-19fc36ad61bd'
var appPrincipal = {
  id: identityPrincipalId
  type: 'ServicePrincipal'
}
var userPrincipal = {
  id: userPrincipalId
  type: 'User'
}
var principals = empty(userPrincipalId) ? array(appPrincipal) : concat(array(appPrincipal), array(userPrincipal))

resource account 'Microsoft.CognitiveServices/accounts@2024-10-01' = {
  name: name
  location: location
  tags: tags
  kind: 'OpenAI'
  sku: {
    name: 'S0'
  }
  identity: {
    type: 'SystemAssigned'
  }
  properties: {
    customSubDomainName: name
    disableLocalAuth: true
    publicNetworkAccess: 'Enabled'
  }
}

resource deployment 'Microsoft.CognitiveServices/accounts/deployments@2024-10-01' = {
  parent: account
  name: deploymentName
  sku: {
    name: 'GlobalStandard'
    capacity: capacity
  }
  properties: {
    model: {
      format: 'OpenAI'
      name: modelName
      version: modelVersion
    }
  }
}

resource openAiUser 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for principal in principals: {
    name: guid(account.id, principal.id, cognitiveServicesOpenAIUser)
    scope: account
    properties: {
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', cognitiveServicesOpenAIUser)
      principalId: principal.id
      principalType: principal.type
    }
  }
]

output endpoint string = account.properties.endpoint
output deploymentName string = deployment.name
