// Resume Agent Framework workflows from Blob checkpoints: Flex Consumption function
// app, identity-only storage access, Application Insights, optional private network.
// Deploy with `azd up`, or `az deployment group create -f infra/main.bicep`.
targetScope = 'resourceGroup'

@minLength(1)
@maxLength(64)
@description('Name of the environment; seeds the unique resource names.')
param environmentName string

@description('Region for every resource. It must offer Flex Consumption.')
param location string = resourceGroup().location

@description('Object ID of the deploying user, granted the app\'s data roles for local testing; empty to skip.')
param principalId string = ''

@description('Put the app in a VNet and reach storage only through a private endpoint.')
param vnetEnabled bool = false

@description('Blob container for checkpoints.')
param checkpointContainerName string = 'checkpoints'

@description('Days a thread (its pointer and checkpoints) may sit unread and unwritten before it is deleted; 0 keeps everything.')
@minValue(0)
param checkpointRetentionDays int = 30

@description('Checkpoint storage redundancy. Standard_GZRS adds geo-redundancy at about twice the price.')
@allowed([
  'Standard_ZRS'
  'Standard_GZRS'
  'Standard_RAGZRS'
  'Standard_LRS'
])
param storageSku string = 'Standard_ZRS'

@description('Memory per instance, in MB.')
@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int = 2048

@description('Upper bound on instances (and so on spend).')
@minValue(1)
@maxValue(1000)
param maximumInstanceCount int = 40

@description('Python on Flex Consumption: 3.13 (the default; azure-functions 2.x and the pinned azure-functions-runtime worker), or 3.12 / 3.11 (azure-functions 1.x, the platform worker).')
@allowed([
  '3.11'
  '3.12'
  '3.13'
])
param pythonVersion string = '3.13'

@description('Provision Azure OpenAI and host WORKFLOW=chat-agents on it. Deploy requirements-chat-agents.txt as requirements.txt with it; the azd prepackage hook refuses to package without.')
param deployAzureOpenAI bool = false

@description('Model for the Azure OpenAI deployment.')
param openAiModelName string = 'gpt-4o-mini'
param openAiModelVersion string = '2024-07-18'

@description('Deployment capacity, in thousands of tokens per minute.')
param openAiCapacity int = 10

@secure()
@description('Standard Webhooks signing secret(s) (whsec_...); empty turns signature checks off.')
param webhookSecret string = ''

@description('Optional Key Vault secret URI (https://<vault>.vault.azure.net/secrets/<name>) whose value is CHECKPOINT_MAC_KEYS; empty leaves checkpoint MACs off. Grant the app identity Key Vault Secrets User on that vault.')
param checkpointMacKeysSecretUri string = ''

@description('THREAD_AUTHORIZER, e.g. functions_adapter.authorizers:thread_prefix_of_principal; empty: no per-thread authorization.')
param threadAuthorizer string = ''

@description('Entra ID app (client) ID: turns on App Service Authentication (Easy Auth) in front of the app. Empty: off.')
param easyAuthClientId string = ''

@description('Optional Key Vault secret URI whose value is CALLBACK_SECRET (whsec_...), which signs completion callbacks; empty leaves callbacks off. Grant the app identity Key Vault Secrets User on that vault.')
param callbackSecretUri string = ''

@description('Hosts completion callbacks may go to, comma-separated (exact names and *.example.com); empty allows any public HTTPS host.')
param callbackAllowedHosts string = ''

@description('Optional Key Vault secret URI whose value is GITHUB_WEBHOOK_SECRET; set, the GitHub adapter (POST /api/adapters/github) is registered. Grant the app identity Key Vault Secrets User on that vault.')
param githubWebhookSecretUri string = ''

@description('Optional Key Vault secret URI whose value is SLACK_SIGNING_SECRET; set, the Slack adapter (/api/adapters/slack/events and /answer) is registered.')
param slackSigningSecretUri string = ''

@description('Optional Key Vault secret URI whose value is SLACK_BOT_TOKEN (xoxb-...), which posts the Slack adapter\'s replies.')
param slackBotTokenUri string = ''

@description('ADAPTER_ANSWER_URL: the completion callback of the adapters\' turns (for Slack: https://<app>.azurewebsites.net/api/adapters/slack/answer); empty: none.')
param adapterAnswerUrl string = ''

@description('The run queue background runs use (RUNS_QUEUE); its poison queue is <name>-poison.')
param runsQueueName string = 'runs'

@description('Always-ready instances for the background-run queue trigger; 0 scales it from zero.')
param backgroundAlwaysReady int = 0

var abbrs = loadJsonContent('abbreviations.json')
var resourceToken = toLower(uniqueString(subscription().id, resourceGroup().id, environmentName, location))
var tags = {
  'azd-env-name': environmentName
}
var functionAppName = '${abbrs.webSitesFunctions}resume-${resourceToken}'
var deploymentContainerName = 'app-package-${take(resourceToken, 20)}'

module identity 'app/identity.bicep' = {
  name: 'identity'
  params: {
    name: '${abbrs.managedIdentityUserAssignedIdentities}resume-${resourceToken}'
    location: location
    tags: tags
  }
}

module storage 'app/storage.bicep' = {
  name: 'storage'
  params: {
    name: '${abbrs.storageStorageAccounts}${resourceToken}'
    location: location
    tags: tags
    deploymentContainerName: deploymentContainerName
    checkpointContainerName: checkpointContainerName
    checkpointRetentionDays: checkpointRetentionDays
    vnetEnabled: vnetEnabled
    skuName: storageSku
    runsQueueName: runsQueueName
  }
}

module monitoring 'app/monitoring.bicep' = {
  name: 'monitoring'
  params: {
    logAnalyticsName: '${abbrs.operationalInsightsWorkspaces}${resourceToken}'
    applicationInsightsName: '${abbrs.insightsComponents}${resourceToken}'
    location: location
    tags: tags
  }
}

module network 'app/network.bicep' = if (vnetEnabled) {
  name: 'network'
  params: {
    vnetName: '${abbrs.networkVirtualNetworks}${resourceToken}'
    location: location
    tags: tags
    storageAccountId: storage.outputs.id
    privateEndpointName: '${abbrs.networkPrivateEndpoints}blob-${resourceToken}'
  }
}

module openAi 'app/openai.bicep' = if (deployAzureOpenAI) {
  name: 'openai'
  params: {
    name: 'oai-${resourceToken}'
    location: location
    tags: tags
    deploymentName: openAiModelName
    modelName: openAiModelName
    modelVersion: openAiModelVersion
    capacity: openAiCapacity
    identityPrincipalId: identity.outputs.principalId
    userPrincipalId: principalId
  }
}

module rbac 'app/rbac.bicep' = {
  name: 'rbac'
  params: {
    storageAccountName: storage.outputs.name
    checkpointContainerName: checkpointContainerName
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    identityPrincipalId: identity.outputs.principalId
    userPrincipalId: principalId
  }
}

module functionApp 'app/function-app.bicep' = {
  name: 'function-app'
  params: {
    name: functionAppName
    planName: '${abbrs.webServerFarms}${resourceToken}'
    location: location
    tags: tags
    identityId: identity.outputs.id
    identityClientId: identity.outputs.clientId
    storageBlobEndpoint: storage.outputs.blobEndpoint
    storageQueueEndpoint: storage.outputs.queueEndpoint
    runsQueueName: runsQueueName
    backgroundAlwaysReady: backgroundAlwaysReady
    callbackSecretUri: callbackSecretUri
    threadAuthorizer: threadAuthorizer
    easyAuthClientId: easyAuthClientId
    callbackAllowedHosts: callbackAllowedHosts
    githubWebhookSecretUri: githubWebhookSecretUri
    slackSigningSecretUri: slackSigningSecretUri
    slackBotTokenUri: slackBotTokenUri
    adapterAnswerUrl: adapterAnswerUrl
    deploymentContainerName: deploymentContainerName
    checkpointContainerName: checkpointContainerName
    applicationInsightsConnectionString: monitoring.outputs.connectionString
    instanceMemoryMB: instanceMemoryMB
    maximumInstanceCount: maximumInstanceCount
    pythonVersion: pythonVersion
    webhookSecret: webhookSecret
    checkpointMacKeysSecretUri: checkpointMacKeysSecretUri
    workflow: deployAzureOpenAI ? 'chat-agents' : 'default'
    azureOpenAiEndpoint: deployAzureOpenAI ? openAi.outputs.endpoint : ''
    azureOpenAiDeployment: deployAzureOpenAI ? openAi.outputs.deploymentName : ''
    virtualNetworkSubnetId: vnetEnabled ? network.outputs.appSubnetId : ''
  }
  dependsOn: [
    rbac
  ]
}

output AZURE_LOCATION string = location
output AZURE_FUNCTION_APP_NAME string = functionApp.outputs.name
output AZURE_FUNCTION_APP_HOSTNAME string = functionApp.outputs.defaultHostName
output AZURE_STORAGE_ACCOUNT_NAME string = storage.outputs.name
output AZURE_STORAGE_BLOB_ENDPOINT string = storage.outputs.blobEndpoint
output CHECKPOINT_CONTAINER string = checkpointContainerName
// azd's prepackage hook (scripts/check_deploy_requirements.sh) reads this: chat-agents needs
// its own lock deployed.
output WORKFLOW string = deployAzureOpenAI ? 'chat-agents' : 'default'
