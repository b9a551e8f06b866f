//! Reading a buffer back to the host: copy to a mappable buffer, map, wait.

use super::Runner;
use crate::gpu::Gpu;
use crate::{Error, Result};

impl Runner<'_> {
    /// Reads the first `bytes` bytes of `src` (the buffer itself is padded to 16 bytes).
    pub(super) fn read_back(&self, src: &wgpu::Buffer, bytes: u64) -> Result<Vec<u8>> {
        self.gpu.read_back(src, bytes)
    }
}

impl Gpu {
    /// Reads the first `bytes` bytes of `src`, which needs COPY_SRC (a copy to a mappable buffer,
    /// map, wait).
    pub fn read_back(&self, src: &wgpu::Buffer, bytes: u64) -> Result<Vec<u8>> {
        let size = bytes
            .next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT)
            .min(src.size());
        let staging = self.scoped("reading the output back", || {
            let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("readback"),
                size,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let mut enc = self.device.create_command_encoder(&Default::default());
            enc.copy_buffer_to_buffer(src, 0, &staging, 0, size);
            self.submit([enc.finish()]);
            staging
        })?;
        let slice = staging.slice(..);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.wait("mapping the output")?;
        match rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return Err(Error::Gpu {
                    stage: "mapping the output".into(),
                    message: e.to_string(),
                })
            }
            Err(_) => {
                return Err(Error::Gpu {
                    stage: "mapping the output".into(),
                    message: "the map callback never ran".into(),
                })
            }
        }
        let data = slice.get_mapped_range().map_err(|e| Error::Gpu {
            stage: "mapping the output".into(),
            message: e.to_string(),
        })?;
        let out: Vec<u8> = data[..(bytes as usize).min(data.len())].to_vec();
        drop(data);
        staging.unmap();
        Ok(out)
    }
}
