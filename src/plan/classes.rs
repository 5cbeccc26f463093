//! Traffic classes, DSCP values and queues (MLT §4.2.2; docs/src/design/plan.md#classes-dscp-values-and-queues).
//!
//! With P queues, the highest (P−1) carries the transport's control traffic and the
//! lowest (0) everything that is not ML traffic. The P−2 queues between carry
//! gradients: layer i of L goes to class ⌊i·C/L⌋ with C = min(P−2, L) classes, and
//! class c to queue P−2−c, so front layers sit in the higher-priority queues. Traffic
//! class and queue numbers are equal on every switch.

use endhost_core::config::ClassTag;
use serde::{Deserialize, Serialize};

use crate::inventory::Inventory;

/// How traffic is classified, identical on every switch and host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QosPlan {
    pub priorities: u8,
    pub control_dscp: u8,
    pub control_queue: u8,
    pub default_queue: u8,
    /// Gradient classes, highest priority (front layers) first.
    pub classes: Vec<GradientClass>,
    /// Queue of every DSCP value, indexed by DSCP (64 entries).
    pub dscp_to_queue: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GradientClass {
    #[serde(flatten)]
    pub tag: ClassTag,
    /// Parameters in this class's layers.
    pub params: u64,
    /// Fraction of the model's gradient traffic this class carries.
    pub share: f64,
    /// Where the class's middle layer sits in the model: 0 front, 1 back.
    pub position: f64,
}

/// Class of layer `layer` among `layers` layers split into `classes` classes.
pub fn class_of_layer(layer: usize, layers: usize, classes: usize) -> usize {
    layer * classes / layers
}

pub fn plan_classes(inv: &Inventory) -> QosPlan {
    let t = &inv.training;
    let p = t.priorities;
    let layers = t.layers.len();
    let count = inv.gradient_classes();
    let total: u64 = t.layers.iter().map(|l| l.params).sum();
    let mut classes: Vec<GradientClass> = Vec::with_capacity(count);
    for (i, layer) in t.layers.iter().enumerate() {
        let c = class_of_layer(i, layers, count);
        match classes.get_mut(c) {
            Some(class) => {
                class.tag.last_layer = i as u32;
                class.params += layer.params;
            }
            None => classes.push(GradientClass {
                tag: ClassTag {
                    class: c as u8,
                    dscp: t.gradient_dscp[c],
                    queue: p - 2 - c as u8,
                    first_layer: i as u32,
                    last_layer: i as u32,
                },
                params: layer.params,
                share: 0.0,
                position: 0.0,
            }),
        }
    }
    for class in &mut classes {
        class.share = class.params as f64 / total as f64;
        let middle = f64::from(class.tag.first_layer + class.tag.last_layer) / 2.0;
        class.position = if layers > 1 {
            middle / (layers - 1) as f64
        } else {
            0.5
        };
    }
    let default_queue = 0;
    let mut dscp_to_queue = vec![default_queue; 64];
    dscp_to_queue[usize::from(t.control_dscp)] = p - 1;
    for class in &classes {
        dscp_to_queue[usize::from(class.tag.dscp)] = class.tag.queue;
    }
    QosPlan {
        priorities: p,
        control_dscp: t.control_dscp,
        control_queue: p - 1,
        default_queue,
        classes,
        dscp_to_queue,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_spread_evenly_front_first() {
        let classes: Vec<usize> = (0..16).map(|i| class_of_layer(i, 16, 6)).collect();
        assert_eq!(classes, [0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5]);
        // Fewer layers than classes: one class per layer, none empty.
        let classes: Vec<usize> = (0..3).map(|i| class_of_layer(i, 3, 3)).collect();
        assert_eq!(classes, [0, 1, 2]);
    }
}
