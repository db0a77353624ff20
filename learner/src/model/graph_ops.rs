//! Counts the tensor ops recorded in an autograd graph: a stand-in, on any
//! device, for the kernel launches the same computation makes on a GPU.
//!
//! candle launches one kernel (or one cuBLAS call) per op that writes a new
//! buffer; views (reshape, narrow, transpose, broadcast, `get`) share their
//! input's buffer and launch nothing. So the count is the number of
//! distinct buffers among the graph's nodes, variables excluded. Only nodes
//! that lead to a variable are in a graph (`Tensor::sorted_nodes`): work on
//! data alone (V-trace's targets, masks) is not counted, and neither is the
//! optimizer, which works on detached tensors (its count is in
//! `learn::optimizer`'s docs).
//!
//! For the backward pass, run `backward` with `CANDLE_GRAD_DO_NOT_DETACH=1`
//! in the environment (read once per thread, by candle): the gradients then
//! keep the graph of the ops that made them, and counting over the loss and
//! all gradients gives forward plus backward. The `train_ops` harness in
//! `benches/` does that.
//!
//! Cost: one walk of the graph, a hash set of buffer addresses.
use std::collections::HashSet;

use candle_core::Tensor;

/// Distinct buffers written by the ops in the graphs of `roots`, views and
/// variables excluded (see the module docs).
pub fn ops_in_graph<'a>(roots: impl IntoIterator<Item = &'a Tensor>) -> usize {
    let mut variables = HashSet::new();
    let mut written = HashSet::new();
    for root in roots {
        for node in root.sorted_nodes() {
            let key = buffer_address(node);
            if node.is_variable() {
                variables.insert(key);
            } else {
                written.insert(key);
            }
        }
    }
    written.difference(&variables).count()
}

/// The address of the buffer behind `t`; equal for a tensor and its views.
fn buffer_address(t: &Tensor) -> usize {
    let (storage, _) = t.storage_and_layout();
    std::ptr::from_ref::<candle_core::Storage>(&storage) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device, Var};

    #[test]
    fn counts_ops_that_write_and_not_views_or_variables() -> candle_core::Result<()> {
        let w = Var::ones((3, 4), DType::F32, &Device::Cpu)?;
        let x = Tensor::ones((2, 3), DType::F32, &Device::Cpu)?;
        // matmul (1), a view, an affine (2), a reshape view, a sum (3).
        let y = x.matmul(w.as_tensor())?;
        let y = y.t()?.affine(2.0, 0.0)?;
        let y = y.reshape(8)?.sum_all()?;
        assert_eq!(ops_in_graph([&y]), 3);
        // A view of the variable itself writes nothing.
        let v = w.as_tensor().t()?.sum_all()?;
        assert_eq!(ops_in_graph([&v]), 1);
        // Ops on data alone are not in the graph.
        let data = (x.affine(3.0, 1.0)? * 2.0)?;
        assert_eq!(ops_in_graph([&data]), 0);
        // Shared nodes are counted once.
        assert_eq!(ops_in_graph([&y, &y]), 3);
        Ok(())
    }
}
