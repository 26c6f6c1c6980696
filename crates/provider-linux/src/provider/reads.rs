//! readFiles, listDir and listProjectDir:
//! [`checkfu_sandbox_hostfs::reads`] over this provider's state directory
//! (its records through [`super::host`]).

use async_trait::async_trait;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_hostfs::reads;

use super::inner::LinuxProvider;

#[async_trait]
impl ReadFilesMember for LinuxProvider {
    async fn read_files(&self, request: ReadFilesRequest) -> Result<ReadFilesResult, SandboxError> {
        reads::read_files(&*self.inner, request).await
    }
}

#[async_trait]
impl ListDirMember for LinuxProvider {
    async fn list_dir(&self, request: ListDirRequest) -> Result<ListDirResult, SandboxError> {
        reads::list_dir(&*self.inner, request).await
    }
}

#[async_trait]
impl ListProjectDirMember for LinuxProvider {
    async fn list_project_dir(
        &self,
        request: ListProjectDirRequest,
    ) -> Result<ListProjectDirResult, SandboxError> {
        reads::list_project_dir(&*self.inner, request).await
    }
}
